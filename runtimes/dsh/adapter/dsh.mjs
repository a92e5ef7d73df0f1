// Load dsh's own packages from one node_modules folder (SURFACECHECK_DSH_MODULES, else ../node_modules).
// Each package is imported through its main entry, the bundle the packages themselves import
// (dsh-npm-facts: lib/types/*.js are duplicate module instances, never the code that runs).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export const MODULES_DIR = resolve(process.env.SURFACECHECK_DSH_MODULES || join(here, '..', 'node_modules'));

/** The packages the adapter imports; ../packages.json is the one list (the Python side checks a modules folder with it). */
export const PACKAGES = JSON.parse(readFileSync(join(here, '..', 'packages.json'), 'utf8')).packages;

function entry(pkg) {
  const root = join(MODULES_DIR, '@deepseek-ai', pkg);
  const manifest = join(root, 'package.json');
  if (!existsSync(manifest)) {
    throw new Error(`@deepseek-ai/${pkg} is not installed under ${MODULES_DIR}`);
  }
  const meta = JSON.parse(readFileSync(manifest, 'utf8'));
  return { file: join(root, meta.main || 'lib/index.js'), version: meta.version };
}

/** The loaded packages, keyed by short name, plus their versions (reported in hello). */
export async function loadDsh() {
  const mods = {};
  const versions = {};
  for (const pkg of PACKAGES) {
    const { file, version } = entry(pkg);
    mods[pkg] = await import(pathToFileURL(file).href);
    versions[`@deepseek-ai/${pkg}`] = version;
  }
  return { mods, versions, modulesDir: MODULES_DIR };
}
