// surfacecheck test plugin: run the shipped `/compact` command when the agent goes idle
// after an assistant reply carrying the marker. Loaded through the cordis config (a local module row);
// needs the `commands` row and `command-compact` (which registers /compact over ctx.compaction).
// The SDK's JSON-RPC server has no command surface in dsh 0.1.1-rc.1, so this is the only way to
// exercise manual /compact (spec 11) through the shipped runtime. The command's own lifecycle events
// (`command/run`, `command/done`) land in the session log; nothing else is written by this plugin.
// It also copies the runtime's logger records (error, info, warn) to stderr, one line each prefixed
// `[dsh <type> <name>]`: the shipped executable composes no console logger, so warnings such as
// "step compaction failed: ...; continuing the turn" would otherwise be invisible (stdout is JSON-RPC).
export const name = 'surfacecheck-compact-on-marker'
export const inject = ['commands']

const DEFAULT_MARKER = '[[surfacecheck:compact]]'

function render(args) {
  const rest = args.slice()
  let head = rest.length && typeof rest[0] === 'string' ? rest.shift() : ''
  head = head.replace(/%([sdifoOcC%])/g, (match, char) => {
    if (char === '%') return '%'
    const value = rest.shift()
    return char === 'o' || char === 'O' ? safeJson(value) : String(value)
  })
  const tail = rest.map(v => (v instanceof Error ? (v.stack || v.message) : typeof v === 'string' ? v : safeJson(v)))
  return [head, ...tail].filter(Boolean).join(' ').replace(/\n/g, '\\n')
}

function safeJson(value) {
  try { return JSON.stringify(value) } catch { return String(value) }
}

export function apply(ctx, config) {
  const marker = (config && config.marker) || DEFAULT_MARKER
  const armed = new WeakSet()

  if (!config || config.logToStderr !== false) {
    ctx.logger.exporter({
      levels: { default: 2 },
      export(message) {
        try {
          process.stderr.write(`[dsh ${message.type} ${message.name}] ${render(message.args)}\n`)
        } catch { /* a logger sink must never fail the runtime */ }
      },
    })
  }

  ctx.on('session/event', (session, event) => {
    if (event.type !== 'assistant/message') return
    let text = ''
    try { text = JSON.stringify(event.data) } catch { return }
    if (text.includes(marker)) armed.add(session)
  })

  ctx.on('agent/status', ({ agent, status }) => {
    if (status !== 'idle' || !armed.has(agent.session)) return
    armed.delete(agent.session)
    // Defer past the status emission so the agent is observably idle when compactNow checks admission.
    setImmediate(() => {
      const controller = new AbortController()
      ctx.commands.execute(agent, '/compact', [], controller.signal).then(
        (execution) => {
          if (execution === undefined) ctx.logger.warn('surfacecheck: /compact is not registered')
        },
        (error) => { ctx.logger.warn(`surfacecheck: /compact failed: ${error && error.message}`) },
      )
    })
  })
}
