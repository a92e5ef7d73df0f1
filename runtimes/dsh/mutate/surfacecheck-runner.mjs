// surfacecheck's gate as a StrykerJS test runner (`surfacecheck mutate --runtime dsh`, and `--runtime gemini|ai`,
// whose gate serves the compaction contract's scenarios as its units; surfacecheck/mutate/).
//
// Each Stryker worker keeps one gate process (`python -m surfacecheck.mutate.gate serve`), so Python and the suite
// load once per worker, not once per mutant. A run is one JSON line each way (gate.py's docstring). The gate's
// units are Stryker's "tests": the dry run reports them with the mutant coverage each recorded (coverageAnalysis
// perTest), so Stryker sends a mutant only the units that reach it and marks unreached mutants NoCoverage.
//
// Outcomes, honestly: a unit that fails kills the mutant; a gate that hangs past Stryker's timeout (scaled from
// the dry run) is a Timeout, and a runtime that hung or died inside the gate is a Timeout or an Error, never a
// kill. Plain objects stand for @stryker-mutator/api's enums and declareClassPlugin, so the file needs no import
// of Stryker and can live in the repository while Stryker is installed into surfacecheck's cache.
import { spawn } from 'node:child_process';
import { appendFileSync, openSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const GATE = JSON.parse(process.env.SURFACECHECK_MUTATE_GATE || 'null');
// `surfacecheck mutate --max-mutants N` (Stryker has no cap of its own): the only mutants run, by mutantKey; any
// other is answered at once as not selected, and dropped from surfacecheck's figures.
const SELECTED = GATE?.select ? new Set(GATE.select) : null;
const NOT_SELECTED = 'not selected (--max-mutants)';

/** What names a mutant across Stryker runs: mutator, 0-based span, replacement (surfacecheck/mutate/stryker_frameworks.py). */
export const mutantKey = (m) => `${m.mutatorName}|${m.location.start.line}:${m.location.start.column}-${m.location.end.line}:${m.location.end.column}|${m.replacement}`;

class Gate {
  constructor() {
    const log = openSync(GATE.log, 'a');
    this.child = spawn(GATE.python, ['-m', 'surfacecheck.mutate.gate', 'serve', ...GATE.args], {
      cwd: GATE.cwd, env: process.env, stdio: ['pipe', 'pipe', log], detached: true,
    });
    this.waiting = null;
    this.exited = null;
    this.lines = createInterface({ input: this.child.stdout, crlfDelay: Infinity });
    this.lines.on('line', (line) => { const w = this.waiting; this.waiting = null; w?.resolve(JSON.parse(line)); });
    this.child.on('exit', (code, signal) => {
      this.exited = `gate process exited (${signal ?? code})`;
      const w = this.waiting; this.waiting = null; w?.resolve({ status: 'error', message: this.exited, tests: [] });
    });
  }

  run(request, timeoutMs) {
    if (this.exited) return Promise.resolve({ status: 'error', message: this.exited, tests: [] });
    return new Promise((resolve) => {
      const timer = timeoutMs ? setTimeout(() => { this.waiting = null; resolve({ status: 'timeout' }); }, timeoutMs) : null;
      this.waiting = { resolve: (reply) => { if (timer) clearTimeout(timer); resolve(reply); } };
      this.child.stdin.write(JSON.stringify(request) + '\n');
    });
  }

  /** SIGTERM first: the gate kills its runtime processes (their own sessions) and exits; then its whole group. */
  kill() {
    const group = this.child.pid;
    try { process.kill(group, 'SIGTERM'); } catch { /* already gone */ }
    setTimeout(() => { try { process.kill(-group, 'SIGKILL'); } catch { /* already gone */ } }, 2000).unref();
  }
}

const asTests = (reply) => (reply.tests ?? []).map((t) => (t.status === 'failed'
  ? { id: t.id, name: t.id, status: 'failed', failureMessage: t.message, timeSpentMs: Math.round(t.seconds * 1000) }
  : { id: t.id, name: t.id, status: 'success', timeSpentMs: Math.round(t.seconds * 1000) }));

class SurfacecheckTestRunner {
  static inject = ['logger'];

  constructor(logger) {
    this.log = logger;
    this.gate = null;
  }

  capabilities() {
    return { reloadEnvironment: true }; // every unit starts its own runtime process with the mutant's variable
  }

  async init() {
    if (!GATE) throw new Error('SURFACECHECK_MUTATE_GATE is not set: run Stryker through `surfacecheck mutate`');
    await this.startGate();
  }

  /** A new gate process, prepared before any timed run: it records every unit on the unmutated tree (gate.py). */
  async startGate() {
    this.gate = new Gate();
    const reply = await this.gate.run({ prepare: true }, 0);
    if (reply.status === 'prepared') {
      this.log.info(`gate prepared in ${reply.seconds} s: ${reply.recorded} of ${reply.units} units recorded`);
      for (const [unit, why] of Object.entries(reply.not_recorded ?? {})) this.log.info(`  not recorded: ${unit}: ${why}`);
    }
    else this.log.warn(`gate not prepared (${reply.message ?? reply.status}): every unit runs in full`);
  }

  async dryRun({ coverageAnalysis, timeout }) {
    const reply = await this.gate.run({ mutant: null, coverage: coverageAnalysis !== 'off', bail: false }, 0);
    writeFileSync(GATE.baseline, JSON.stringify({ ...reply, coverage: undefined }));
    if (reply.coverage) writeFileSync(GATE.coverage, JSON.stringify(reply.coverage));
    if (reply.status !== 'passed') { // a failing unmutated gate voids the score: Stryker stops here
      return { status: 'error', errorMessage: `the unmutated gate ${reply.status} at ${reply.first}: ${reply.message}` };
    }
    const result = { status: 'complete', tests: asTests(reply) };
    if (coverageAnalysis === 'perTest') result.mutantCoverage = reply.coverage;
    else if (coverageAnalysis === 'all') {
      const all = { ...reply.coverage.static };
      for (const hits of Object.values(reply.coverage.perTest)) for (const [id, n] of Object.entries(hits)) all[id] = (all[id] ?? 0) + n;
      result.mutantCoverage = { static: all, perTest: {} };
    }
    return result;
  }

  async mutantRun(options) {
    if (SELECTED && !SELECTED.has(mutantKey(options.activeMutant))) return { status: 'error', errorMessage: NOT_SELECTED };
    const started = Date.now();
    const result = await this.judge(options);
    // Time per mutant for surfacecheck's report (one short line per append: atomic with O_APPEND).
    appendFileSync(GATE.times, JSON.stringify({ id: options.activeMutant.id, ms: Date.now() - started, status: result.status, by: result.killedBy?.[0] }) + '\n');
    return result;
  }

  async judge({ activeMutant, testFilter, timeout, disableBail, mutantActivation }) {
    const started = Date.now();
    const reply = await this.gate.run({ mutant: activeMutant.id, tests: testFilter ?? null, bail: !disableBail,
      activation: mutantActivation ?? 'static' }, timeout);
    const ms = Date.now() - started;
    if (reply.status === 'timeout') {
      this.gate.kill();
      await this.startGate();
      return { status: 'timeout', reason: `the gate ran past Stryker's ${timeout} ms (${ms} ms)` };
    }
    const nrOfTests = (reply.tests ?? []).length;
    if (reply.status === 'failed') {
      return { status: 'killed', killedBy: [reply.first], failureMessage: reply.message, nrOfTests };
    }
    if (reply.status === 'passed') return { status: 'survived', nrOfTests };
    if (reply.status === 'inconclusive' && reply.kind === 'timeout') {
      return { status: 'timeout', reason: `inside the gate, ${reply.first}: ${reply.message}` };
    }
    if (this.gate.exited) await this.startGate();
    return { status: 'error', errorMessage: `gate ${reply.status} at ${reply.first ?? '-'}: ${reply.message}` };
  }

  async dispose() {
    this.gate?.kill();
  }
}

export const strykerPlugins = [{ kind: 'TestRunner', name: 'surfacecheck', injectableClass: SurfacecheckTestRunner }];
