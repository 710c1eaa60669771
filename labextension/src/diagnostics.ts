/**
 * Diagnostics as you type (spec §6.4): once typing in a WOML cell stops, the cell's
 * text goes to the notebook's kernel over the `woml.diagnostics` comm, and the parser's
 * errors and the key linter's warnings it answers with are underlined.
 *
 * The protocol (kernel side: `%load_ext woml_magic` registers the target). Each request
 * is `{id, code}`, `code` the whole cell; the answer, on the same comm, is
 * `{id, diagnostics: [{line, column, endLine, endColumn, severity, message, source}]}`
 * with 1-based lines and columns in the cell (the `%%woml` line is line 1) counted in
 * code points, the end exclusive and `null` when the kernel knows only where it starts.
 *
 * Nothing is shown when nobody can answer: no kernel, a kernel that is starting, dead
 * or running a cell, a kernel without the target (the extension not loaded there), or
 * no answer in time. Highlighting does not depend on any of it.
 */
import { Diagnostic, setDiagnostics } from '@codemirror/lint';
import { Extension, Text } from '@codemirror/state';
import { EditorView, ViewPlugin, ViewUpdate } from '@codemirror/view';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { isWomlCell } from './language';

/** The comm target the kernel registers (woml_magic/magic/editor.py). */
export const TARGET = 'woml.diagnostics';
/** How long typing must pause before the cell is sent. */
export const DEBOUNCE_MS = 300;
/** An answer later than this is dropped (the kernel is busy with something else). */
const ANSWER_TIMEOUT_MS = 2000;

/** One diagnostic as the kernel sends it. */
interface IKernelDiagnostic {
  line: number;
  column: number;
  endLine: number | null;
  endColumn: number | null;
  severity: 'error' | 'warning';
  message: string;
  source: 'parser' | 'lint';
}

/** What asking the kernel gave: its diagnostics, or why there are none to show. */
type Answer =
  | { kind: 'answered'; diagnostics: IKernelDiagnostic[] }
  | { kind: 'busy' }
  | { kind: 'unavailable' };

/** Finds the kernel of the notebook an editor is in (null: none, or not a notebook). */
export type KernelLocator = (dom: HTMLElement) => Kernel.IKernelConnection | null;

const UNAVAILABLE: Answer = { kind: 'unavailable' };
const BUSY: Answer = { kind: 'busy' };
const READY_STATUSES: ReadonlySet<Kernel.Status> = new Set(['idle', 'busy']);

/**
 * The `woml.diagnostics` comm of one kernel connection, opened on first use and shared
 * by every editor of that kernel.
 */
class DiagnosticsChannel {
  private comm: Kernel.IComm | null = null;
  /** The kernel closed our comm: no target there until it runs code again. */
  private absent = false;
  /** A cell is executing (status busy for an execute_request). */
  private executing = false;
  private nextId = 0;
  private readonly waiting = new Map<number, (answer: Answer) => void>();
  private readonly idleWaiters = new Set<() => void>();

  /** Whether `executing` is a guess: the channel was made while the kernel was busy. */
  private guessed: boolean;

  constructor(private readonly kernel: Kernel.IKernelConnection) {
    // Channels are made when a notebook's kernel appears (index.ts, `watchKernels`);
    // one made later may see the kernel busy without knowing why: assume a cell, until
    // the kernel is idle.
    this.executing = this.guessed = kernel.status === 'busy';
    kernel.iopubMessage.connect(this.onIopub, this);
    kernel.statusChanged.connect(this.onStatus, this);
  }

  /** The kernel's diagnostics of `code`, or why there are none. Never rejects. */
  diagnose(code: string): Promise<Answer> {
    if (this.absent || this.kernel.isDisposed || !READY_STATUSES.has(this.kernel.status)) {
      return Promise.resolve(UNAVAILABLE);
    }
    if (this.executing) {
      return Promise.resolve(BUSY);
    }
    const comm = this.open();
    if (comm === null) {
      return Promise.resolve(UNAVAILABLE);
    }
    const id = ++this.nextId;
    return new Promise<Answer>(resolve => {
      const timer = setTimeout(() => this.settle(id, UNAVAILABLE), ANSWER_TIMEOUT_MS);
      this.waiting.set(id, answer => {
        clearTimeout(timer);
        resolve(answer);
      });
      try {
        comm.send({ id, code }).done.catch(() => this.settle(id, UNAVAILABLE));
      } catch {
        this.settle(id, UNAVAILABLE);
      }
    });
  }

  /** Calls `callback` once, when the cell the kernel is running has finished. */
  whenIdle(callback: () => void): void {
    this.idleWaiters.add(callback);
  }

  private open(): Kernel.IComm | null {
    if (this.comm !== null && !this.comm.isDisposed) {
      return this.comm;
    }
    try {
      const comm = this.kernel.createComm(TARGET);
      comm.onMsg = msg => this.onAnswer(msg);
      comm.onClose = () => this.onClosed(comm);
      comm.open({}).done.catch(() => this.onClosed(comm));
      this.comm = comm;
      return comm;
    } catch {
      return null;
    }
  }

  private onAnswer(msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as { id?: unknown; diagnostics?: unknown };
    if (typeof data.id === 'number') {
      this.settle(data.id, { kind: 'answered', diagnostics: validDiagnostics(data.diagnostics) });
    }
  }

  private onClosed(comm: Kernel.IComm): void {
    if (this.comm !== comm) {
      return;
    }
    this.comm = null;
    this.absent = true;
    this.settleAll(UNAVAILABLE);
  }

  private onIopub(_: Kernel.IKernelConnection, msg: KernelMessage.IIOPubMessage): void {
    const parent = msg.parent_header as Partial<KernelMessage.IHeader>;
    const idle = KernelMessage.isStatusMsg(msg) && msg.content.execution_state === 'idle';
    if (this.guessed && idle) {
      this.guessed = false;
      this.setExecuting(false);
    }
    if (parent.msg_type !== 'execute_request') {
      return;
    }
    if (msg.header.msg_type === 'execute_input') {
      this.absent = false; // the code it runs may load the extension
    } else if (KernelMessage.isStatusMsg(msg)) {
      this.guessed = false;
      this.setExecuting(msg.content.execution_state === 'busy');
    }
  }

  private setExecuting(executing: boolean): void {
    this.executing = executing;
    if (!executing) {
      const waiters = [...this.idleWaiters];
      this.idleWaiters.clear();
      waiters.forEach(callback => callback());
    }
  }

  private onStatus(_: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (!READY_STATUSES.has(status)) {
      // A restart or a dead kernel loses its comms and whatever it had loaded.
      this.comm = null;
      this.absent = false;
      this.executing = false;
      this.settleAll(UNAVAILABLE);
    }
  }

  private settle(id: number, answer: Answer): void {
    const done = this.waiting.get(id);
    if (done) {
      this.waiting.delete(id);
      done(answer);
    }
  }

  private settleAll(answer: Answer): void {
    for (const id of [...this.waiting.keys()]) {
      this.settle(id, answer);
    }
  }
}

const SEVERITIES = new Set(['error', 'warning']);

/** The well-formed entries of what the kernel sent (anything else is dropped). */
function validDiagnostics(value: unknown): IKernelDiagnostic[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const isPosition = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 1;
  const isEnd = (v: unknown): v is number | null => v === null || v === undefined || isPosition(v);
  return value.filter(
    (d): d is IKernelDiagnostic =>
      typeof d === 'object' &&
      d !== null &&
      isPosition(d.line) &&
      isPosition(d.column) &&
      isEnd(d.endLine) &&
      isEnd(d.endColumn) &&
      SEVERITIES.has(d.severity) &&
      typeof d.message === 'string'
  );
}

/** The UTF-16 offset of code point `column` (0-based) in `text`, clamped to it. */
function utf16Offset(text: string, column: number): number {
  let offset = 0;
  for (let n = 0; n < column && offset < text.length; n++) {
    offset += (text.codePointAt(offset) ?? 0) > 0xffff ? 2 : 1;
  }
  return Math.min(offset, text.length);
}

/** Characters of a name the underline covers when the kernel gives only a start. */
const NAME = /[\w:.-]/;

/** A kernel diagnostic as a CodeMirror one: its range in `doc` and its message. */
function toDiagnostic(doc: Text, d: IKernelDiagnostic): Diagnostic {
  const line = doc.line(Math.min(d.line, doc.lines));
  const from = line.from + utf16Offset(line.text, d.column - 1);
  let to = from;
  if (d.endLine != null && d.endColumn != null) {
    const end = doc.line(Math.min(d.endLine, doc.lines));
    to = Math.max(from, end.from + utf16Offset(end.text, d.endColumn - 1));
  } else {
    while (to < line.to && NAME.test(doc.sliceString(to, to + 1))) {
      to++;
    }
  }
  if (to === from && to < line.to) {
    to++; // at least the character it points at
  }
  return {
    from,
    to,
    severity: d.severity,
    message: d.message,
    source: d.source === 'lint' ? 'woml key linter' : 'woml parser'
  };
}

/** The channel of each kernel connection, made when the kernel first appears. */
export class Channels {
  private readonly channels = new WeakMap<Kernel.IKernelConnection, DiagnosticsChannel>();

  of(kernel: Kernel.IKernelConnection): DiagnosticsChannel {
    let channel = this.channels.get(kernel);
    if (channel === undefined) {
      channel = new DiagnosticsChannel(kernel);
      this.channels.set(kernel, channel);
    }
    return channel;
  }
}

/** The lint tooltip in JupyterLab's colours, so it follows the light and dark themes. */
const tooltipTheme = EditorView.theme({
  '.cm-tooltip:has(> .cm-tooltip-lint)': {
    borderColor: 'var(--jp-border-color1)',
    backgroundColor: 'var(--jp-layout-color1)'
  },
  '.cm-tooltip-lint': {
    backgroundColor: 'var(--jp-layout-color1)',
    color: 'var(--jp-content-font-color1)',
    fontFamily: 'var(--jp-ui-font-family)',
    fontSize: 'var(--jp-ui-font-size1)'
  },
  '.cm-diagnosticSource': { color: 'var(--jp-content-font-color2)', opacity: '1' }
});

/**
 * The editor side: on every edit of a WOML cell, wait for typing to pause, ask the
 * kernel, and draw what it answered — if the text is still the one it was asked about.
 */
export function diagnosticsAsYouType(locate: KernelLocator, channels: Channels): Extension {
  const channelOf = (view: EditorView): DiagnosticsChannel | null => {
    const kernel = locate(view.dom);
    return kernel === null ? null : channels.of(kernel);
  };

  const plugin = ViewPlugin.fromClass(
    class {
      private timer: ReturnType<typeof setTimeout> | undefined;
      /** Bumped by every edit: an answer to an older request is dropped. */
      private generation = 0;
      private shown = false;
      private destroyed = false;

      constructor(readonly view: EditorView) {}

      update(update: ViewUpdate): void {
        if (!update.docChanged) {
          return;
        }
        this.generation++;
        clearTimeout(this.timer);
        if (isWomlCell(update.state.doc)) {
          this.timer = setTimeout(() => void this.ask(), DEBOUNCE_MS);
        } else if (this.shown) {
          // Not from inside an update: clear once it is over.
          this.timer = setTimeout(() => this.show([]), 0);
        }
      }

      async ask(): Promise<void> {
        const generation = this.generation;
        const code = this.view.state.doc.toString();
        const channel = channelOf(this.view);
        const answer = channel ? await channel.diagnose(code) : UNAVAILABLE;
        if (this.destroyed || generation !== this.generation) {
          return; // edited since: that edit asks again
        }
        if (answer.kind === 'answered') {
          this.show(answer.diagnostics.map(d => toDiagnostic(this.view.state.doc, d)));
          return;
        }
        this.show([]);
        if (answer.kind === 'busy' && channel) {
          channel.whenIdle(() => {
            if (!this.destroyed && generation === this.generation) {
              void this.ask();
            }
          });
        }
      }

      show(diagnostics: Diagnostic[]): void {
        if (this.destroyed || (!this.shown && diagnostics.length === 0)) {
          return;
        }
        this.shown = diagnostics.length > 0;
        this.view.dispatch(setDiagnostics(this.view.state, diagnostics));
      }

      destroy(): void {
        this.destroyed = true;
        clearTimeout(this.timer);
      }
    }
  );
  return [plugin, tooltipTheme];
}
