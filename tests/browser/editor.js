// Installed in the editor tests' pages (context.add_init_script) as window.__womlEditor.
// Reads what CodeMirror drew for a cell's input: each line as runs of text with the
// highlight classes around them and the colour they give (decorations such as lint underlines, bracket
// matching or selection left out), the lint underlines and the tooltips shown.
(() => {
  if (window.__womlEditor) return;

  // Decoration classes: not the highlighting of a token.
  const DECORATION = /^cm-(lint|matchingBracket|nonmatchingBracket|selection|searchMatch|cursor|tooltip)/;

  function cell(index) {
    return document.querySelectorAll('.jp-Notebook .jp-Cell')[index] || null;
  }

  function lines(index) {
    const c = cell(index);
    if (!c) return null;
    return [...c.querySelectorAll('.jp-InputArea .cm-content .cm-line')].map((line) => {
      const runs = [];
      const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const classes = new Set();
        for (let e = node.parentElement; e && e !== line; e = e.parentElement) {
          for (const name of e.classList) if (!DECORATION.test(name)) classes.add(name);
        }
        const cls = [...classes].sort().join(' ');
        const computed = getComputedStyle(node.parentElement);
        const style = `${computed.color} ${computed.fontStyle} ${computed.fontWeight}`;
        const last = runs[runs.length - 1];
        if (last && last.cls === cls) last.text += node.textContent;
        else runs.push({ text: node.textContent, cls, style });
      }
      return runs;
    });
  }

  function lintRanges(index) {
    const c = cell(index);
    if (!c) return [];
    return [...c.querySelectorAll('.cm-lintRange')].map((e) => ({
      text: e.textContent,
      cls: e.className,
    }));
  }

  function tooltips() {
    return [...document.querySelectorAll('.cm-tooltip-lint')].map((e) => e.textContent);
  }

  function lineText(index, line) {
    const c = cell(index);
    const l = c && c.querySelectorAll('.jp-InputArea .cm-content .cm-line')[line];
    return l ? l.textContent : null;
  }

  window.__womlEditor = { lines, lintRanges, tooltips, lineText };
})();
