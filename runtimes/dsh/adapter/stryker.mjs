// Mutation testing (surfacecheck mutate --runtime dsh, StrykerJS): the hooks Stryker's instrumented code needs
// when the adapter serves a mutated working copy. Inactive unless surfacecheck's gate sets the variables below.
//
// Stryker's instrumentation keeps its state on globalThis.__stryker__: activeMutant (read from
// __STRYKER_ACTIVE_MUTANT__ by the instrumented code itself), currentTestId (which test the coverage counts
// for) and mutantCoverage ({static, perTest}: mutant id -> hits). The gate names the unit it runs in
// SURFACECHECK_STRYKER_TEST (or the stryker_test op, for a process shared by many units) and collects the
// coverage each adapter process leaves in SURFACECHECK_STRYKER_COVERAGE_DIR when it exits.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const namespace = () => (globalThis.__stryker__ ??= {});

/** After dsh is loaded (so module-level code counts as static coverage): name the unit, dump coverage at exit. */
export function installStryker() {
  const dir = process.env.SURFACECHECK_STRYKER_COVERAGE_DIR;
  if (!dir) return null;
  if (process.env.SURFACECHECK_STRYKER_TEST) namespace().currentTestId = process.env.SURFACECHECK_STRYKER_TEST;
  process.on('exit', () => {
    const coverage = namespace().mutantCoverage ?? { static: {}, perTest: {} };
    writeFileSync(join(dir, `coverage-${process.pid}.json`), JSON.stringify(coverage));
  });
  return {
    stryker_test: ({ test }) => {
      namespace().currentTestId = typeof test === 'string' && test ? test : undefined;
      return { test: namespace().currentTestId ?? null };
    },
  };
}
