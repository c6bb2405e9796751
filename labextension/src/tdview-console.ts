import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ToolbarButton } from '@jupyterlab/apputils';
import type { ConsolePanel } from '@jupyterlab/console';
import type { IDocumentManager } from '@jupyterlab/docmanager';
import type { KernelSpec } from '@jupyterlab/services';
import { notebookIcon } from '@jupyterlab/ui-components';
import { UUID } from '@lumino/coreutils';

import { tdviewIcon } from './icons';
import { baseName, consoleCode, rootRelative } from './paths';

/** Session paths of tdview consoles start with this (they sit in the server root). */
const SESSION_PREFIX = 'tdview-';
/** The class of a tdview console panel. */
export const PANEL_CLASS = 'tdview-console';

/** Whether `panel` is a tdview console (also one restored after a page reload). */
export function isTDViewConsole(panel: ConsolePanel): boolean {
  return baseName(panel.sessionContext.path).startsWith(SESSION_PREFIX);
}

/** The kernel spec a tdview console starts: the default one if it is Python. */
export function pythonKernel(specs: KernelSpec.ISpecModels | null): string | undefined {
  if (!specs) {
    return undefined;
  }
  const language = (name: string) => specs.kernelspecs[name]?.language.toLowerCase();
  if (language(specs.default) === 'python') {
    return specs.default;
  }
  return Object.keys(specs.kernelspecs).find(name => language(name) === 'python');
}

/**
 * Opens checkpoints in tdview consoles: a code console on a new Python kernel whose
 * first cell shows the `TDView` widget, so loads land in that kernel and the user can
 * go on typing there, or open a notebook on the same kernel.
 */
export class TDViewConsoles {
  readonly #app: JupyterFrontEnd;
  readonly #docManager: IDocumentManager;
  readonly #open = new Map<string, ConsolePanel>();

  constructor(app: JupyterFrontEnd, docManager: IDocumentManager) {
    this.#app = app;
    this.#docManager = docManager;
  }

  /** Show `path` (relative to the server root) in a tdview console, reusing an open one. */
  async open(path: string): Promise<ConsolePanel> {
    const checkpoint = rootRelative(path);
    const existing = this.#open.get(checkpoint);
    if (existing && !existing.isDisposed) {
      this.#app.shell.activateById(existing.id);
      return existing;
    }
    const { kernelspecs } = this.#app.serviceManager;
    await kernelspecs.ready;
    const name = pythonKernel(kernelspecs.specs);
    const panel: ConsolePanel = await this.#app.commands.execute('console:create', {
      // A session path in the root: the kernel's working directory is the server root,
      // the directory the checkpoint's path is relative to.
      path: `${SESSION_PREFIX}${UUID.uuid4()}`,
      name: `tdview: ${baseName(checkpoint)}`,
      kernelPreference: name ? { name, shouldStart: true } : { language: 'python' },
      activate: true
    });
    this.decorate(panel);
    panel.title.label = `tdview: ${baseName(checkpoint)}`;
    panel.title.caption = `tdview: ${checkpoint}`;
    this.#open.set(checkpoint, panel);
    panel.disposed.connect(() => {
      if (this.#open.get(checkpoint) === panel) {
        this.#open.delete(checkpoint);
      }
    });
    await panel.sessionContext.ready;
    await panel.console.inject(consoleCode(checkpoint));
    return panel;
  }

  /** Mark a tdview console and give it an "Open a notebook on this kernel" button. */
  decorate(panel: ConsolePanel): void {
    if (panel.hasClass(PANEL_CLASS)) {
      return;
    }
    panel.addClass(PANEL_CLASS);
    panel.title.icon = tdviewIcon;
    const button = new ToolbarButton({
      icon: notebookIcon,
      label: 'Notebook',
      tooltip: 'Open a notebook on this kernel',
      className: 'tdview-open-notebook',
      onClick: () => void this.openNotebook(panel)
    });
    panel.toolbar.insertItem(0, 'tdview-open-notebook', button);
  }

  /** Create a notebook in the server root and connect it to `panel`'s kernel. */
  async openNotebook(panel: ConsolePanel): Promise<void> {
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      throw new Error('tdview: this console has no kernel');
    }
    const model = await this.#docManager.newUntitled({ type: 'notebook', path: '' });
    this.#docManager.open(model.path, 'default', { id: kernel.id, name: kernel.name });
  }
}
