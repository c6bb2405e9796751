import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { showErrorMessage } from '@jupyterlab/apputils';
import { type ConsolePanel, IConsoleTracker } from '@jupyterlab/console';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { type FileBrowser, IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { Contents } from '@jupyterlab/services';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { CheckpointFolders } from './checkpoint-folders';
import { compareTargets } from './compare';
import { CHECKPOINT_FILE_TYPE, checkpointFileType } from './file-type';
import { tdviewIcon } from './icons';
import { interceptOpening } from './open-interception';
import { cellCode, parentDir, relativeTo, rootRelative } from './paths';
import { isTDViewConsole, TDViewConsoles } from './tdview-console';

const COMMANDS = {
  open: 'tdview:open',
  openNewKernel: 'tdview:open-new-kernel',
  insertCell: 'tdview:insert-cell',
  compare: 'tdview:compare',
  openNotebook: 'tdview:open-notebook'
} as const;

function activate(
  app: JupyterFrontEnd,
  browsers: IFileBrowserFactory,
  docManager: IDocumentManager,
  consoles: IConsoleTracker,
  notebooks: INotebookTracker | null
): void {
  const { commands, docRegistry, serviceManager } = app;
  const contents = serviceManager.contents;
  docRegistry.addFileType(checkpointFileType);
  const views = new TDViewConsoles(app, docManager);
  const folders = new CheckpointFolders(contents);

  /** A path on the server's own drive (not another drive's), or null. */
  const serverPath = (path: string): string | null => {
    if (contents.driveName(path) !== '') {
      return null;
    }
    try {
      return rootRelative(contents.localPath(path));
    } catch {
      return null;
    }
  };
  const isCheckpointFile = (path: string): boolean =>
    serverPath(path) !== null &&
    docRegistry.getFileTypesForPath(path).some(type => type.name === CHECKPOINT_FILE_TYPE);

  /**
   * The root-relative path of `item` if tdview opens it: a `.tdz`, a folder with meta.json,
   * a folder of checkpoints (see `CheckpointFolders`).
   */
  const checkpointOf = (item: Contents.IModel): string | null => {
    const path = serverPath(item.path);
    const applies =
      item.type === 'directory' ? folders.opens(item.path) : isCheckpointFile(item.path);
    return path !== null && applies ? path : null;
  };
  /** What a menu entry applies to: the one selected file-browser item, if a checkpoint. */
  const selectedCheckpoint = (): string | null => {
    const selected = [...(browsers.tracker.currentWidget?.selectedItems() ?? [])];
    return selected.length === 1 && selected[0] ? checkpointOf(selected[0]) : null;
  };
  /** The two checkpoints selected in the file browser (older first), or null. */
  const selectedPair = (): [string, string] | null =>
    compareTargets([...(browsers.tracker.currentWidget?.selectedItems() ?? [])], checkpointOf);
  /** A command's target: its `path` argument (relative to the server root), or the selection. */
  const target = (args: ReadonlyPartialJSONObject): string | null =>
    typeof args.path === 'string' ? serverPath(args.path) : selectedCheckpoint();

  const failed = (title: string) => (error: unknown) =>
    void showErrorMessage(title, error instanceof Error ? error.message : String(error));
  const openView = (path: string, newKernel = false): void => {
    views.open(path, { newKernel }).catch(failed('tdview: cannot open the checkpoint'));
  };

  interceptOpening(docManager, isCheckpointFile, path => {
    const checked = serverPath(path);
    if (checked !== null) {
      openView(checked);
    }
  });

  // Folders are checked as the file browser lists them, so the menu knows in time.
  const watch = (browser: FileBrowser): void => {
    browser.model.refreshed.connect(() => folders.scan(browser.model.items()));
    folders.scan(browser.model.items());
  };
  browsers.tracker.forEach(watch);
  browsers.tracker.widgetAdded.connect((_, browser) => watch(browser));

  // tdview consoles, including those restored after a reload, get their toolbar button.
  // Those JupyterLab restores with the page (they come back empty) show their checkpoint again.
  let restoring = true;
  void app.restored.then(() => {
    restoring = false;
  });
  const decorate = (panel: ConsolePanel): void => {
    if (isTDViewConsole(panel)) {
      views.decorate(panel);
      if (restoring) {
        views.restore(panel).catch(failed('tdview: cannot restore the console'));
      }
    }
  };
  consoles.forEach(decorate);
  consoles.widgetAdded.connect((_, panel) => decorate(panel));

  commands.addCommand(COMMANDS.open, {
    label: 'Open in tdview',
    caption:
      'Browse the checkpoint in a tdview console, in the tdview kernel already running ' +
      '(the first one starts it)',
    icon: tdviewIcon,
    isVisible: () => selectedCheckpoint() !== null,
    execute: args => {
      const path = target(args);
      if (path !== null) {
        openView(path);
      }
    }
  });

  commands.addCommand(COMMANDS.openNewKernel, {
    label: 'Open in new tdview kernel',
    caption: 'Browse the checkpoint in a tdview console on a Python kernel of its own',
    icon: tdviewIcon,
    isVisible: () => selectedCheckpoint() !== null,
    execute: args => {
      const path = target(args);
      if (path !== null) {
        openView(path, true);
      }
    }
  });

  commands.addCommand(COMMANDS.compare, {
    label: 'Compare in tdview',
    caption: 'Compare the two selected checkpoints in a tdview console (in the tdview kernel)',
    icon: tdviewIcon,
    isVisible: () => selectedPair() !== null,
    isEnabled: () => selectedPair() !== null,
    execute: args => {
      // `a` and `b` arguments (relative to the server root), or the selection
      const given = typeof args.a === 'string' && typeof args.b === 'string';
      const a = given ? serverPath(args.a as string) : null;
      const b = given ? serverPath(args.b as string) : null;
      const pair = given ? (a !== null && b !== null ? [a, b] : null) : selectedPair();
      if (pair && pair[0] && pair[1]) {
        views
          .openCompare(pair[0], pair[1])
          .catch(failed('tdview: cannot compare the checkpoints'));
      }
    }
  });

  commands.addCommand(COMMANDS.insertCell, {
    label: 'Insert TDView cell',
    caption: 'Insert a cell showing this checkpoint into the active notebook',
    icon: tdviewIcon,
    isVisible: () => selectedCheckpoint() !== null && !!notebooks?.currentWidget,
    execute: args => {
      const path = target(args);
      const panel = notebooks?.currentWidget;
      const model = panel?.content.model;
      if (path === null || !panel || !model) {
        return;
      }
      const notebookPath = serverPath(panel.context.path);
      if (notebookPath === null) {
        const error = new Error('the notebook is not on the server root drive');
        return failed('tdview: cannot insert a cell')(error);
      }
      // The kernel of a notebook runs in the notebook's directory.
      const source = cellCode(relativeTo(parentDir(notebookPath), path));
      const index = Math.min(panel.content.activeCellIndex + 1, model.cells.length);
      model.sharedModel.insertCell(index, { cell_type: 'code', source });
      panel.content.activeCellIndex = index;
      app.shell.activateById(panel.id);
    }
  });

  commands.addCommand(COMMANDS.openNotebook, {
    label: 'Open a notebook on this kernel',
    caption: "Create a notebook connected to this tdview console's kernel",
    isEnabled: () => !!consoles.currentWidget && isTDViewConsole(consoles.currentWidget),
    execute: () => {
      const panel = consoles.currentWidget;
      if (panel && isTDViewConsole(panel)) {
        return views.openNotebook(panel).catch(failed('tdview: cannot open a notebook'));
      }
      return undefined;
    }
  });

  const item = '.jp-DirListing-item';
  app.contextMenu.addItem({ command: COMMANDS.open, selector: item, rank: 0 });
  app.contextMenu.addItem({ command: COMMANDS.openNewKernel, selector: item, rank: 0 });
  app.contextMenu.addItem({ command: COMMANDS.insertCell, selector: item, rank: 0 });
  app.contextMenu.addItem({ command: COMMANDS.compare, selector: item, rank: 0 });
  app.contextMenu.addItem({ command: COMMANDS.openNotebook, selector: '.tdview-console', rank: 0 });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'tdview-jupyterlab:plugin',
  description:
    'Open tensordict checkpoints (.tdz archives, folders holding meta.json) and folders of them in tdview.',
  autoStart: true,
  requires: [IFileBrowserFactory, IDocumentManager, IConsoleTracker],
  optional: [INotebookTracker],
  activate
};

export default plugin;
