// Mutation testing (surfacecheck mutate --runtime dsh, StrykerJS): the hooks Stryker's instrumented code needs
// when the adapter serves a mutated working copy, and `replay`, many requests in one round trip (a survivor runs
// ~19,000 appends: per-line framing would cost more than dsh's own work). Inactive unless surfacecheck's gate
// sets SURFACECHECK_MUTATE (and the variables below).
//
// Stryker's instrumentation keeps its state on globalThis.__stryker__: activeMutant (read from
// __STRYKER_ACTIVE_MUTANT__ by the instrumented code itself), currentTestId (which test the coverage counts
// for) and mutantCoverage ({static, perTest}: mutant id -> hits). The gate names the unit it runs in
// SURFACECHECK_STRYKER_TEST (or the stryker_test op, for a process shared by many units) and collects the
// coverage each adapter process leaves in SURFACECHECK_STRYKER_COVERAGE_DIR when it exits.
//
// Static coverage is what ran while dsh's modules were imported (module-level code: Stryker runs such a mutant
// against every unit). The adapter's own start-up world (World.open before the first request) is not: every
// unit resets the world under its own name, so what start-up ran is forgotten rather than made static.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ProtocolError } from './refusal.mjs';

const namespace = () => (globalThis.__stryker__ ??= {});

// The clock's values, not dsh's behaviour: left out of a digest (surfacecheck/mutate/pristine.py TIMING_KEYS).
const TIMING_KEYS = new Set(['elapsed', 'time_ns']);
const digestOf = (result) => createHash('sha1')
  .update(JSON.stringify(result, (key, value) => (TIMING_KEYS.has(key) ? undefined : value)) ?? 'undefined')
  .digest('base64');

/** Called right after dsh is imported; returns null outside mutation testing. */
export function strykerHooks() {
  if (!process.env.SURFACECHECK_MUTATE) return null;
  const dir = process.env.SURFACECHECK_STRYKER_COVERAGE_DIR;
  // The very object the instrumented code writes to (its helper keeps a reference): edited, never replaced.
  const coverage = (namespace().mutantCoverage ??= { static: {}, perTest: {} });
  const imported = { ...coverage.static };
  if (dir) {
    process.on('exit', () => {
      writeFileSync(join(dir, `coverage-${process.pid}.json`), JSON.stringify(coverage));
    });
  }
  return {
    /** After the start-up world is open: forget its coverage, then count for the unit the environment names. */
    started() {
      for (const id of Object.keys(coverage.static)) {
        if (id in imported) coverage.static[id] = imported[id];
        else delete coverage.static[id];
      }
      for (const test of Object.keys(coverage.perTest)) delete coverage.perTest[test];
      namespace().currentTestId = process.env.SURFACECHECK_STRYKER_TEST || undefined;
    },
    ops: (handlers) => ({
      /** Activate a mutant in this process (Stryker's `runtime` activation: dsh was imported unmutated, and the
       * instrumented code reads `activeMutant` at every switch); none with `mutant: null`. */
      stryker_mutant: ({ mutant }) => {
        namespace().activeMutant = typeof mutant === 'string' && mutant ? mutant : undefined;
        return { mutant: namespace().activeMutant ?? null };
      },
      stryker_test: ({ test }) => {
        namespace().currentTestId = typeof test === 'string' && test ? test : undefined;
        return { test: namespace().currentTestId ?? null };
      },
      /** `calls`: [[op, args], ...] answered in order by the same handlers, up to the first protocol or internal
       * error (what a one-request-per-line client would have raised at that call). With `digest`, each answer is
       * `{digest}` (SHA-1 of its JSON) instead of `{result}`: compared with the unmutated runtime's digests
       * (surfacecheck/mutate/pristine.py), a survivor's units cost one small round trip each. */
      replay: async ({ calls, digest }) => {
        if (!Array.isArray(calls)) throw new ProtocolError('bad-args', 'calls must be a list of [op, args]');
        const answers = [];
        for (const [op, args] of calls) {
          const handler = handlers[op];
          try {
            if (!handler || op === 'replay') throw new ProtocolError('unknown-op', `unknown op '${op}'`);
            const result = await handler(args ?? {});
            answers.push(digest ? { digest: digestOf(result) } : { result });
          } catch (err) {
            const type = err instanceof ProtocolError ? err.type : 'internal';
            answers.push({ error: { type, message: `${err?.name ?? 'Error'}: ${err?.message ?? err}` } });
            break;
          }
        }
        return { answers };
      },
    }),
  };
}
