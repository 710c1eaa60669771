/**
 * woml-magic's JupyterLab 4 / Notebook 7 extension (spec §6.4): `%%woml` cells are
 * highlighted as WOML and underline the kernel's diagnostics as the user types.
 *
 * Both are CodeMirror extensions given to every code cell's editor through
 * `IEditorExtensionRegistry`; they act only while the cell's first line starts with
 * `%%woml`. Completion and help come from the kernel (`complete_request`,
 * `inspect_request`), so they need nothing here.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { EditorExtensionRegistry, IEditorExtensionRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

import { Channels, diagnosticsAsYouType, KernelLocator } from './diagnostics';
import { womlLanguageSwitch } from './language';

/** Markdown and raw cells are never WOML, whatever their first line says. */
function isCodeEditor(model: unknown): boolean {
  const type = (model as { type?: unknown }).type;
  return type !== 'markdown' && type !== 'raw';
}

/**
 * Give every notebook's kernel its diagnostics channel as soon as it connects, so the
 * channel knows when a cell is running before the first WOML edit asks it anything.
 */
function watchKernels(notebooks: INotebookTracker, channels: Channels): void {
  const watch = (panel: NotebookPanel): void => {
    const connect = (): void => {
      const kernel = panel.sessionContext.session?.kernel;
      if (kernel) {
        channels.of(kernel);
      }
    };
    panel.sessionContext.kernelChanged.connect(connect);
    connect();
  };
  notebooks.forEach(watch);
  notebooks.widgetAdded.connect((_, panel) => watch(panel));
}

/** The kernel of the notebook whose DOM holds an editor. */
function notebookKernel(notebooks: INotebookTracker | null): KernelLocator {
  return (dom: HTMLElement): Kernel.IKernelConnection | null => {
    const panel = notebooks?.find(p => p.node.contains(dom));
    return panel?.sessionContext.session?.kernel ?? null;
  };
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'woml-magic:editor',
  description:
    "Highlights %%woml cells as WOML and underlines the kernel's diagnostics as you type.",
  autoStart: true,
  requires: [IEditorExtensionRegistry],
  optional: [INotebookTracker],
  activate: (
    _app: JupyterFrontEnd,
    registry: IEditorExtensionRegistry,
    notebooks: INotebookTracker | null
  ): void => {
    const channels = new Channels();
    if (notebooks) {
      watchKernels(notebooks, channels);
    }
    const diagnostics = diagnosticsAsYouType(notebookKernel(notebooks), channels);
    registry.addExtension({
      name: 'woml-magic:woml',
      factory: options =>
        isCodeEditor(options.model)
          ? EditorExtensionRegistry.createImmutableExtension([
              womlLanguageSwitch(options.model.sharedModel.getSource()),
              diagnostics
            ])
          : null
    });
  }
};

export default plugin;
