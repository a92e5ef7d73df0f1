// Mutation testing (surfacecheck mutate --runtime gemini|ai, StrykerJS; surfacecheck/mutate/node_gate.py): the ops
// the gate drives when an adapter serves a working copy whose package Stryker instrumented. Inactive (no ops)
// unless the gate sets SURFACECHECK_MUTATE.
//
// Stryker's instrumented code keeps its state on globalThis.__stryker__: activeMutant (the mutant switched on,
// first read from __STRYKER_ACTIVE_MUTANT__ by the instrumented code itself), currentTestId (the unit coverage is
// counted for) and mutantCoverage ({static, perTest}: mutant id -> hits). The gate's units are its scenarios:
// it names the one it runs (stryker_test) and reads back what each reached (stryker_coverage).
const namespace = () => (globalThis.__stryker__ ??= {});

/** The mutation ops, called once the packages are imported (so `static` is what ran at import); {} otherwise. */
export function mutationOps() {
  if (!process.env.SURFACECHECK_MUTATE) return {};
  // The very object the instrumented code writes to (its helper keeps a reference): edited, never replaced.
  const coverage = (namespace().mutantCoverage ??= { static: {}, perTest: {} });
  const imported = { ...coverage.static };
  return {
    /** Switch a mutant on for every later call (Stryker's `runtime` activation); none with `mutant: null`. */
    stryker_mutant: async ({ mutant }) => {
      namespace().activeMutant = typeof mutant === 'string' && mutant ? mutant : undefined;
      return { mutant: namespace().activeMutant ?? null };
    },
    /** Count coverage for the unit `test` from now on (none: coverage outside any unit is not kept). */
    stryker_test: async ({ test }) => {
      namespace().currentTestId = typeof test === 'string' && test ? test : undefined;
      return { test: namespace().currentTestId ?? null };
    },
    /** The coverage of import time and of every unit since the last call, which is forgotten. */
    stryker_coverage: async () => {
      const perTest = { ...coverage.perTest };
      for (const test of Object.keys(coverage.perTest)) delete coverage.perTest[test];
      for (const id of Object.keys(coverage.static)) if (!(id in imported)) delete coverage.static[id];
      return { static: imported, perTest };
    },
  };
}
