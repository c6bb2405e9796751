import { LabIcon } from '@jupyterlab/ui-components';

/** A small tree: the checkpoint file type and the tdview commands. */
const svgstr = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="3" y="3" width="8" height="5" rx="1"/>
    <rect x="13" y="10" width="8" height="5" rx="1"/>
    <rect x="13" y="17" width="8" height="5" rx="1"/>
    <path d="M6 8h2v4.5h5v2H8v4h5v2H6z"/>
  </g>
</svg>`;

export const tdviewIcon = new LabIcon({ name: 'tdview-jupyterlab:checkpoint', svgstr });
