/**
 * WOML as CodeMirror 6 highlights it (spec §6.4): the document is XML, the content of
 * every `<script>` (CDATA included) is JavaScript, and the `%%woml` line is the magic's
 * options.
 *
 * A cell is a WOML cell while its first line starts with `%%woml`; `womlLanguageSwitch`
 * gives every code cell's editor a compartment that holds the WOML language exactly
 * then, so JupyterLab's own language (IPython) is untouched in every other cell.
 */
import { javascriptLanguage } from '@codemirror/lang-javascript';
import { xmlLanguage } from '@codemirror/lang-xml';
import { LanguageSupport, LRLanguage, StreamLanguage } from '@codemirror/language';
import { Compartment, EditorState, Extension, Prec, Text } from '@codemirror/state';
import { Input, parseMixed, SyntaxNodeRef } from '@lezer/common';

/** The first line of a WOML cell: the cell magic, alone or followed by its options. */
const MAGIC = /^%%woml(?:\s|$)/;

/** Whether `doc` is a WOML cell (its first line starts with `%%woml`). */
export function isWomlCell(doc: Text): boolean {
  return MAGIC.test(doc.line(1).text);
}

/** The same test on a cell's source, before it has an editor state. */
export function isWomlSource(source: string): boolean {
  return MAGIC.test(source);
}

/**
 * The `%%woml` line: the magic, its `--flags` and their values. Token names are
 * @lezer/highlight tags, so JupyterLab's highlight style colours them like the rest.
 */
const magicLine = StreamLanguage.define<Record<string, never>>({
  name: 'woml-options',
  startState: () => ({}),
  token(stream) {
    if (stream.sol() && stream.match('%%woml')) {
      return 'meta';
    }
    if (stream.eatSpace()) {
      return null;
    }
    if (stream.match(/^--?[A-Za-z][\w-]*/)) {
      return 'attributeName';
    }
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/) || stream.match(/^'(?:[^'\\]|\\.)*'?/)) {
      return 'string';
    }
    if (stream.match(/^\d+(?:\.\d+)?(?:ms|s|m|h|d)?(?=\s|$)/)) {
      return 'number';
    }
    stream.eatWhile(/\S/);
    return null;
  }
});

const CDATA_OPEN = '<![CDATA[';
const CDATA_CLOSE = ']]>';

/** The JavaScript inside a CDATA section: between its markers (the end may be missing
 * while the user types it). */
function cdataContent(node: SyntaxNodeRef, input: Input): { from: number; to: number } {
  const closed = input.read(Math.max(node.from, node.to - CDATA_CLOSE.length), node.to);
  return {
    from: node.from + CDATA_OPEN.length,
    to: closed === CDATA_CLOSE ? node.to - CDATA_CLOSE.length : node.to
  };
}

/** Where the first line ends (the magic's options are parsed up to there). */
function firstLineEnd(input: Input): number {
  const head = input.read(0, Math.min(input.length, 4096));
  const newline = head.indexOf('\n');
  return newline < 0 ? head.length : newline;
}

const nested = parseMixed((node, input) => {
  if (node.type.isTop) {
    const end = firstLineEnd(input);
    return end > 0 ? { parser: magicLine.parser, overlay: [{ from: 0, to: end }] } : null;
  }
  if (node.name !== 'Element') {
    return null;
  }
  const tag = node.node.getChild('OpenTag')?.getChild('TagName');
  if (!tag || input.read(tag.from, tag.to) !== 'script') {
    return null;
  }
  return {
    parser: javascriptLanguage.parser,
    overlay: (child: SyntaxNodeRef) =>
      child.name === 'Text' ? true : child.name === 'Cdata' ? cdataContent(child, input) : false
  };
});

/** WOML: XML with JavaScript in `<script>` and the magic's options on the first line. */
export const womlLanguage = LRLanguage.define({
  name: 'woml',
  parser: xmlLanguage.parser.configure({ wrap: nested }),
  languageData: {
    commentTokens: { block: { open: '<!--', close: '-->' } }
  }
});

/** Above JupyterLab's language (the editor uses the first language it is given). */
const active: Extension = Prec.highest(new LanguageSupport(womlLanguage));

/** One compartment identity for all editors; each editor state holds its own content. */
const language = new Compartment();

/**
 * The language switch of one code cell's editor: WOML while the first line starts with
 * `%%woml`, nothing otherwise. `source` is the cell's text when the editor is made.
 */
export function womlLanguageSwitch(source: string): Extension {
  return [
    language.of(isWomlSource(source) ? active : []),
    EditorState.transactionExtender.of(tr => {
      if (!tr.docChanged) {
        return null;
      }
      const wanted = isWomlCell(tr.newDoc);
      if (wanted === (language.get(tr.startState) === active)) {
        return null;
      }
      return { effects: language.reconfigure(wanted ? active : []) };
    })
  ];
}
