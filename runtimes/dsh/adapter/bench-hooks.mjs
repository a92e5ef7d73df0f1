// Module customization hook for the `bench` op (bench.mjs registers it lazily, on the first bench request).
// For exactly one URL — dsh-token-meter's bundle imported with the `?surfacecheck-bench` query — append
// `export { foldSurfaceProjection, foldSurfaceTokens }`: the two surface folds the bundle defines but does
// not export. The installed file is untouched and every other import (including the plain, unqueried
// dsh-token-meter the adapter runs) passes through unchanged; the queried URL is a second instance of the
// same bundle code, whose own imports resolve to the shared dsh-session / dsh-llm instances.
export const QUERY = 'surfacecheck-bench';
const SUFFIX = `/@deepseek-ai/dsh-token-meter/lib/index.js?${QUERY}`;
const NAMES = ['foldSurfaceProjection', 'foldSurfaceTokens'];

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!(url.startsWith('file:') && url.endsWith(SUFFIX))) return result;
  const source = typeof result.source === 'string' ? result.source : Buffer.from(result.source).toString('utf8');
  return { ...result, source: `${source}\nexport { ${NAMES.join(', ')} };\n`, shortCircuit: true };
}
