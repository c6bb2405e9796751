import type { DocumentRegistry } from '@jupyterlab/docregistry';

import { tdviewIcon } from './icons';

/** The name of the checkpoint file type; the file browser puts it in `data-file-type`. */
export const CHECKPOINT_FILE_TYPE = 'tdview-checkpoint';

/**
 * `.tdz` archives, `.safetensors` files and HDF5 files (`td.to_h5`: `.h5`, `.hdf5`).
 * `fileFormat: null` asks the contents API for
 * metadata only, should any document code ever open one; tdview's own opening never asks
 * at all.
 */
export const checkpointFileType: Partial<DocumentRegistry.IFileType> = {
  name: CHECKPOINT_FILE_TYPE,
  displayName: 'tensordict checkpoint',
  extensions: ['.tdz', '.safetensors', '.h5', '.hdf5'],
  mimeTypes: ['application/x-tdview-checkpoint'],
  contentType: 'file',
  fileFormat: null,
  icon: tdviewIcon
};
