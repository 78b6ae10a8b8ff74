/**
 * Timing: batches of calls at a fixed concurrency, contenders interleaved round by round, and
 * the statistics the report uses (medians, percentiles, paired ratios).
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"

/** A benchmark step that could not run (a contender failed, a server did not start). */
export class BenchError extends Data.TaggedError("BenchError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** One batch: its wall time and the latency of each call, in milliseconds. */
export interface Batch {
  readonly calls: number
  readonly millis: number
  readonly latencies: ReadonlyArray<number>
  /** CPU time of this process (user + system) during the batch, in microseconds. */
  readonly cpuMicros: number
}

/** Calls per second of a batch. */
export const throughput = (batch: Batch): number => batch.calls / (batch.millis / 1000)

/**
 * Runs `calls` calls of `call(i)`, at most `concurrency` at a time, and times each. The first
 * failure fails the batch.
 */
export const runBatch = (
  calls: number,
  concurrency: number,
  call: (i: number) => Promise<unknown>
): Effect.Effect<Batch, BenchError> =>
  Effect.tryPromise({
    try: async () => {
      const latencies = new Array<number>(calls)
      let next = 0
      const worker = async () => {
        while (next < calls) {
          const i = next++
          const start = performance.now()
          await call(i)
          latencies[i] = performance.now() - start
        }
      }
      const cpu = process.cpuUsage()
      const start = performance.now()
      await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker))
      const millis = performance.now() - start
      const { system, user } = process.cpuUsage(cpu)
      return { calls, millis, latencies, cpuMicros: user + system }
    },
    catch: (cause) =>
      new BenchError({
        message: `a call failed during a batch: ${
          Runtime.isFiberFailure(cause) ? Cause.pretty(cause[Runtime.FiberFailureCauseId]) : String(cause)
        }`,
        cause
      })
  })

/**
 * The order of the contenders in a round: each round starts one contender later than the
 * previous one (A B C, B C A, C A B, …), so no contender always runs first or last.
 */
export const rotation = <C>(contenders: ReadonlyArray<C>, round: number): Array<C> =>
  contenders.map((_, k) => contenders[(round + k) % contenders.length]!)

const sorted = (values: ReadonlyArray<number>): Array<number> => [...values].sort((a, b) => a - b)

/** The median (the mean of the two middle values for an even count); NaN when empty. */
export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return Number.NaN
  const s = sorted(values)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/** The nearest-rank percentile `p` (0–100); NaN when empty. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const s = sorted(values)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!
}

/**
 * The median of the per-round ratios `a[i] / b[i]`: rounds run side by side, so each ratio
 * compares two batches measured a moment apart, under the same load.
 */
export const pairedRatio = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number =>
  median(a.map((value, i) => value / b[i]!))

/** A summary of the batches of one contender on one path. */
export interface Summary {
  /** Median calls per second over the rounds. */
  readonly throughput: number
  /** Calls per second of each round. */
  readonly rounds: ReadonlyArray<number>
  /** Latency percentiles over every call of every round, in milliseconds. */
  readonly p50: number
  readonly p99: number
  /** Median CPU time of this process per call, in microseconds (in-process servers included). */
  readonly cpuPerCall: number
}

/** Summarizes the batches of one contender. */
export const summarize = (batches: ReadonlyArray<Batch>): Summary => {
  const latencies = batches.flatMap((batch) => batch.latencies)
  const rounds = batches.map(throughput)
  return {
    throughput: median(rounds),
    rounds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuPerCall: median(batches.map((batch) => batch.cpuMicros / batch.calls))
  }
}

/** Runs `effect` once and returns its wall time in milliseconds. */
export const timed = <E, R>(effect: Effect.Effect<unknown, E, R>): Effect.Effect<number, E, R> =>
  Effect.suspend(() => {
    const start = performance.now()
    return Effect.map(effect, () => performance.now() - start)
  })
