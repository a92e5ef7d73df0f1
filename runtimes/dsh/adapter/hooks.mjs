// Module customization hook (node:module register): for exactly the bundles named below, append an
// `export { ... }` of functions the bundle defines but does not export, so the adapter can call dsh's
// own internal code (one module instance, the installed files untouched). Nothing else is changed.
const EXTRA = {
  '/@deepseek-ai/dsh-compaction-basic/lib/index.js': [
    'selectCompactableRange', 'compactSurfaceRegion', 'SurfaceChangedError', 'TargetPressureConfigError',
    'resolveConfig', 'routedTarget', 'summarizeWithLlm',
  ],
  '/@deepseek-ai/dsh-agent-loop/lib/index.js': ['RuntimeContextProjection', 'ReactLoopAgent'],
};

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  const names = Object.entries(EXTRA).find(([suffix]) => url.startsWith('file:') && url.endsWith(suffix))?.[1];
  if (!names) return result;
  const source = typeof result.source === 'string' ? result.source : Buffer.from(result.source).toString('utf8');
  return { ...result, source: `${source}\nexport { ${names.join(', ')} };\n`, shortCircuit: true };
}
