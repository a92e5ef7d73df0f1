// Where the installed packages are: SURFACECHECK_CONVERSATION_NODE_MODULES names the node_modules folder the
// pinned packages were installed into (surfacecheck/runtime/conversation/node.py). Packages are imported by path,
// so their own imports resolve inside that folder.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const MODULES = process.env.SURFACECHECK_CONVERSATION_NODE_MODULES || '';

/** import() of `file` inside `pkg` of the installed modules. */
export async function load(pkg, file) {
  if (!MODULES) throw new Error('SURFACECHECK_CONVERSATION_NODE_MODULES is not set');
  return import(pathToFileURL(join(MODULES, pkg, file)).href);
}

/** The installed version of `pkg`. */
export function version(pkg) {
  return JSON.parse(readFileSync(join(MODULES, pkg, 'package.json'), 'utf8')).version;
}
