import type { IDocumentManager } from '@jupyterlab/docmanager';

/**
 * Route the default opening of checkpoint files (double-click in the file browser, the
 * browser's "Open", `docmanager:open`) to `openView`, before the document manager
 * creates a document context, which would ask the contents API for the whole file.
 *
 * JupyterLab has no hook for this, so `open` is wrapped on the document manager, the
 * way jupyterlab-h5web does it. An explicit "Open With" choice still goes through.
 */
export function interceptOpening(
  docManager: IDocumentManager,
  isCheckpointFile: (path: string) => boolean,
  openView: (path: string) => void
): void {
  // The class takes one argument more than the interface declares: pass all along.
  const open = docManager.open as (...args: unknown[]) => ReturnType<IDocumentManager['open']>;
  docManager.open = (path: string, widgetName = 'default', ...rest: unknown[]) => {
    if (widgetName === 'default' && isCheckpointFile(path)) {
      openView(path);
      return undefined;
    }
    return open.call(docManager, path, widgetName, ...rest);
  };
}
