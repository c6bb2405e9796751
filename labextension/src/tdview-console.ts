import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ToolbarButton } from '@jupyterlab/apputils';
import type { ConsolePanel } from '@jupyterlab/console';
import type { IDocumentManager } from '@jupyterlab/docmanager';
import type { Kernel, KernelSpec } from '@jupyterlab/services';
import { notebookIcon } from '@jupyterlab/ui-components';
import { UUID } from '@lumino/coreutils';

import { compareConsoleCode, compareSessionName, comparisonOfSession } from './compare';
import { tdviewIcon } from './icons';
import { baseName, consoleCode, notebookName, parentDir, rootRelative } from './paths';

/** Session paths of tdview consoles start with this (they sit in the server root). */
const SESSION_PREFIX = 'tdview-';
/** A tdview console's session name: this, then the checkpoint's root-relative path (what
 * a console restored after a page reload is shown again from). */
const NAME_PREFIX = 'tdview: ';

/** The checkpoint a tdview console's session name records, or null. */
export function checkpointOfSession(name: string): string | null {
  if (!name.startsWith(NAME_PREFIX)) {
    return null;
  }
  try {
    return rootRelative(name.slice(NAME_PREFIX.length));
  } catch {
    return null;
  }
}

/**
 * Send this kernel connection's comm messages to the main shell, not to subshells.
 *
 * JupyterLab (4.4 and later) sends the comm messages of one comm target over one kernel
 * subshell, shared through a table keyed by kernel and target. A comm that closes looks
 * its entry up, awaits the subshell's id, asks the kernel to delete that subshell and
 * drops the entry, without checking whether a comm that opened during the await took
 * the entry meanwhile. That comm then sends to a subshell the kernel no longer has
 * ("Unknown subshell_id"), and the view never hears back. In a tdview console the
 * widget's comms open while the kernel and its widget manager are still starting, which
 * is when that happens; on the main shell every message is answered.
 */
export function commsOnMainShell(kernel: Kernel.IKernelConnection | null | undefined): void {
  const connection = kernel as { commsOverSubshells?: string } | null | undefined;
  if (connection && 'commsOverSubshells' in connection) {
    connection.commsOverSubshells = 'disabled';
  }
}
/** The class of a tdview console panel. */
export const PANEL_CLASS = 'tdview-console';
/** The class that makes the widget fill a scroll area's height (js/src/fill-height.ts):
 * given to the console's cells' area, so the view uses the panel's height. */
export const FILL_AREA = 'tdview-fill';

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
  readonly #checkpoints = new WeakMap<ConsolePanel, string>();

  constructor(app: JupyterFrontEnd, docManager: IDocumentManager) {
    this.#app = app;
    this.#docManager = docManager;
  }

  /** Show `path` (relative to the server root) in a tdview console, reusing an open one. */
  async open(path: string): Promise<ConsolePanel> {
    const checkpoint = rootRelative(path);
    const name = `${NAME_PREFIX}${checkpoint}`;
    return this.#start(name, consoleCode(checkpoint), checkpoint);
  }

  /**
   * Compare checkpoint `a` (the older) with `b` in a tdview console,
   * `TDView(a, compare=b)`, reusing an open one; its notebook goes next to `b`.
   */
  async openCompare(a: string, b: string): Promise<ConsolePanel> {
    const [older, newer] = [rootRelative(a), rootRelative(b)];
    const name = compareSessionName(older, newer);
    return this.#start(name, compareConsoleCode(older, newer), newer);
  }

  /** A console named `name` (the key of an open one too) that runs `code` first. */
  async #start(name: string, code: string, checkpoint: string): Promise<ConsolePanel> {
    const existing = this.#open.get(name);
    if (existing && !existing.isDisposed) {
      this.#app.shell.activateById(existing.id);
      return existing;
    }
    const { kernelspecs } = this.#app.serviceManager;
    await kernelspecs.ready;
    const kernel = pythonKernel(kernelspecs.specs);
    const panel: ConsolePanel = await this.#app.commands.execute('console:create', {
      // A session path in the root: the kernel's working directory is the server root,
      // the directory the checkpoint's path is relative to.
      path: `${SESSION_PREFIX}${UUID.uuid4()}`,
      name,
      kernelPreference: kernel ? { name: kernel, shouldStart: true } : { language: 'python' },
      activate: true
    });
    this.decorate(panel);
    this.#track(panel, name, checkpoint);
    await panel.sessionContext.ready;
    commsOnMainShell(panel.sessionContext.session?.kernel);
    await panel.console.inject(code);
    return panel;
  }

  /**
   * A tdview console that JupyterLab restored after a page reload: the console is empty
   * (consoles keep no outputs), so show its checkpoint again, on the same kernel.
   */
  async restore(panel: ConsolePanel): Promise<void> {
    await panel.sessionContext.ready;
    const name = panel.sessionContext.name;
    const checkpoint = checkpointOfSession(name);
    const pair = comparisonOfSession(name);
    const [code, near] = pair
      ? [compareConsoleCode(...pair), pair[1]]
      : [checkpoint === null ? null : consoleCode(checkpoint), checkpoint];
    if (code === null || near === null || panel.isDisposed || this.#checkpoints.has(panel)) {
      return;
    }
    this.#track(panel, name, near);
    commsOnMainShell(panel.sessionContext.session?.kernel);
    if (panel.console.cells.length === 0) {
      await panel.console.inject(code);
    }
  }

  /** Titles, the console's entry (by its session name; `checkpoint`: where its notebook
   * goes), and the kernel's shutdown when the panel closes. */
  #track(panel: ConsolePanel, name: string, checkpoint: string): void {
    this.#checkpoints.set(panel, checkpoint);
    // The console titles its tab with the session's name after each run: the path.
    panel.title.label = name;
    this.#open.set(name, panel);
    // Noted while the panel lives: once it is disposed, its session connection is gone.
    let ids: { session: string; kernel: string } | null = null;
    const note = () => {
      const session = panel.sessionContext.session;
      if (session?.kernel) {
        ids = { session: session.id, kernel: session.kernel.id };
      }
    };
    panel.sessionContext.kernelChanged.connect((_, change) => {
      commsOnMainShell(change.newValue);
      note();
    });
    void panel.sessionContext.ready.then(note);
    panel.disposed.connect(() => {
      if (this.#open.get(name) === panel) {
        this.#open.delete(name);
      }
      if (ids) {
        void this.#shutdownUnlessShared(ids.session, ids.kernel);
      }
    });
  }

  /**
   * Shut a closed tdview console's session (and so its kernel, about 250 MB) down, unless
   * another session (a notebook or console opened on this kernel) still uses the kernel.
   */
  async #shutdownUnlessShared(sessionId: string, kernelId: string): Promise<void> {
    const sessions = this.#app.serviceManager.sessions;
    try {
      await sessions.refreshRunning();
      const others = [...sessions.running()].filter(
        model => model.id !== sessionId && model.kernel?.id === kernelId
      );
      if (others.length === 0) {
        await sessions.shutdown(sessionId);
      }
    } catch (error) {
      console.warn('tdview: could not shut the closed console\'s kernel down', error);
    }
  }

  /** Mark a tdview console and give it an "Open a notebook on this kernel" button. */
  decorate(panel: ConsolePanel): void {
    if (panel.hasClass(PANEL_CLASS)) {
      return;
    }
    panel.addClass(PANEL_CLASS);
    panel.console.node.querySelector('.jp-CodeConsole-content')?.classList.add(FILL_AREA);
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

  /**
   * Create a notebook next to the checkpoint, named after it (`ckpt-tdview.ipynb`, then
   * `ckpt-tdview-2.ipynb` …), and connect it to `panel`'s kernel.
   */
  async openNotebook(panel: ConsolePanel): Promise<void> {
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      throw new Error('tdview: this console has no kernel');
    }
    const checkpoint =
      this.#checkpoints.get(panel) ?? checkpointOfSession(panel.sessionContext.name);
    const path = checkpoint === null ? 'tdview.ipynb' : await this.#freeName(checkpoint);
    const contents = this.#app.serviceManager.contents;
    await contents.save(path, { type: 'notebook', format: 'json', content: emptyNotebook() });
    this.#docManager.open(path, 'default', { id: kernel.id, name: kernel.name });
  }

  /** The first notebook path next to `checkpoint` that does not exist yet. */
  async #freeName(checkpoint: string): Promise<string> {
    const contents = this.#app.serviceManager.contents;
    const dir = parentDir(checkpoint);
    for (let n = 1; n < 1000; n++) {
      const name = notebookName(baseName(checkpoint), n);
      const path = dir ? `${dir}/${name}` : name;
      try {
        await contents.get(path, { content: false });
      } catch {
        return path; // not there (or unreadable): take it
      }
    }
    throw new Error(`tdview: no free notebook name next to ${checkpoint}`);
  }
}

/** An empty nbformat 4 notebook on a Python kernel. */
function emptyNotebook(): Record<string, unknown> {
  return {
    cells: [],
    metadata: {
      kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}
