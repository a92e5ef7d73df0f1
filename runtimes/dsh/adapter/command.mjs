// `/compact` (spec 11): dsh-commands' CommandRuntime.execute (command/run, handler, command/done) with
// dsh-command-compact's registered handler, which calls engine.compactNow → agent.runMaintenance (ReactLoopAgent).
// The world: the caller's (UI) signal, an agent that is busy when `agent_idle` is false.
import { ProtocolError } from './refusal.mjs';
import { req } from './compaction.mjs';
import { failureOf, parseFaults, resultJson } from './failures.mjs';
import { parseScripts } from './summarizer.mjs';

/** Plug dsh's command plane into the world's ctx (called from Composition.compose). */
export async function plugCommands(world) {
  const { mods } = world.dsh;
  await world.ctx.plugin(mods['dsh-commands'].CommandRuntime);
  await world.ctx.plugin(mods['dsh-command-compact']);
}

export function commandOps(world, comp) {
  const { ManualCompactionError } = world.dsh.mods['dsh-compaction'];
  return {
    async manual_compact(args) {
      await comp.ready;
      const raw = req(args, 'args', 'string', { optional: true, def: '' });
      req(args, 'command_id', 'string', { optional: true }); // dsh's executor mints the command id itself
      const aborted = req(args, 'aborted', 'bool', { optional: true, def: false });
      const idle = req(args, 'agent_idle', 'bool', { optional: true, def: true });
      const scripts = parseScripts(args, ProtocolError);
      const faults = parseFaults(args, ProtocolError);
      const agent = comp.agent;
      // dsh's executor mints the command id; the protocol names it `command_id`, else cmd-<seq of its command/run>
      const protocolCommandId = (minted) => {
        const run = world.session.events.findLast((e) => e.type === 'command/run' && e.data.commandId === minted);
        return run === undefined ? minted : (args.command_id ?? `cmd-${run.seq}`);
      };
      const line = raw.length === 0 || /^[\t\n\r ]/u.test(raw) ? `/compact${raw}` : `/compact ${raw}`;
      let settled = null;
      let thrown = null;
      let record = [];
      const [, common] = await comp.run(args, scripts, faults, async (op) => {
        record = op.maintenance;
        // the summary script `agent-cancel`: the user cancels the agent (ReactLoopAgent.cancel), which aborts the
        // maintenance signal runMaintenance hands compactNow's task (DIVERGENCES D8); the inbox is the world's
        op.agent = { abort: () => agent.cancel(undefined, { keepInbox: true }) };
        if (aborted) op.caller.abort();
        const idlePhase = agent.phase;
        // the world: a busy agent (a running turn). Set directly, not through setPhase: nothing is published.
        if (!idle) agent.phase = { kind: 'running', abort: new AbortController(), turn: idlePhase.lastTurn, step: 0, wakeRequested: false };
        try {
          settled = await world.ctx.commands.execute(agent, line, [], op.caller.signal);
        } catch (err) {
          thrown = err;
        } finally {
          // The executor settles (and writes command/done) as soon as the caller's signal aborts, without
          // waiting for the handler (dsh-commands `withAbort`); compactNow's task goes on and writes its
          // error close after command/done. The op's effect is everything up to quiescence, as
          // command-compact's own teardown drains its started handlers (DIVERGENCES D5).
          await Promise.all(op.handlers);
          if (!idle) agent.phase = idlePhase;
        }
      });
      // what compactNow settled with (spec 11.2): its result, or the error it threw and that error's cause
      const last = record.at(-1);
      const now = last === undefined ? null : { result: resultJson(last.result ?? null),
        failure: failureOf(comp, last.error ?? null), cause: failureOf(comp, last.error?.cause ?? null) };
      if (now?.result?.sourceCommandId != null) now.result.sourceCommandId = protocolCommandId(now.result.sourceCommandId);
      if (settled === null || settled === undefined) {
        const text = thrown instanceof Error ? thrown.message : String(thrown);
        return { kind: 'error', code: 'aborted', text, sourceEventSeq: null, compact_now: now, ...common };
      }
      const { kind, text = null } = settled.result;
      const sourceEventSeq = settled.result.sourceEventSeq ?? null;
      let code;
      if (kind === 'success') code = sourceEventSeq === null ? 'nothing' : 'success';
      else if (last === undefined) code = 'usage';
      else if (last.error instanceof ManualCompactionError && !last.aborted) code = last.error.code;
      else code = 'aborted';
      return { kind, code, text, sourceEventSeq, compact_now: now, ...common };
    },
  };
}
