/**
 * The memory store: what the `Idempotency` combinator costs per call over the bare downstream
 * effect, and the heap a million records take with the background expiry running.
 */
import { Fingerprint, Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Supervisor from "effect/Supervisor"
import { randomUUID } from "node:crypto"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { median, pairedRatio, timed } from "./Measure.js"
import { recordingTracer } from "./Suite.js"
import { Payload, payloadFor, Receipt } from "./Workload.js"

export interface OverheadResult {
  readonly calls: number
  readonly rounds: number
  /** Microseconds per call of each round. */
  readonly bare: ReadonlyArray<number>
  readonly first: ReadonlyArray<number>
  readonly replay: ReadonlyArray<number>
  /** Median over the rounds of (call − bare call), in microseconds. */
  readonly firstOverhead: number
  readonly replayOverhead: number
  /**
   * The same as CPU time of the process per call (`process.cpuUsage`): what other processes on
   * the machine take from the benchmark's wall time does not count in it.
   */
  readonly cpu: {
    readonly bare: ReadonlyArray<number>
    readonly first: ReadonlyArray<number>
    readonly replay: ReadonlyArray<number>
    readonly firstOverhead: number
    readonly replayOverhead: number
  }
  /** Median over the rounds of the call's time as a multiple of the bare call's. */
  readonly firstFactor: number
  /** The same calls with a tracer installed (one that records every span), microseconds per call. */
  readonly firstTraced: ReadonlyArray<number>
  readonly replayTraced: ReadonlyArray<number>
  /** Median over the rounds of the traced call's time as a multiple of the untraced one's. */
  readonly firstTracedFactor: number
  readonly replayTracedFactor: number
  /** Spans the tracer recorded per first execution and per replay. */
  readonly spansPerFirst: number
  readonly spansPerReplay: number
  /** Effect operations, fibers started and suspensions of one first execution and one replay (see `operations`). */
  readonly operations: { readonly first: Operations; readonly replay: Operations }
}

export interface Operations {
  readonly operations: number
  readonly fibers: number
  readonly suspensions: number
}

/**
 * Counts what the runtime does while it is on: every operation any fiber evaluates (Effect calls
 * `onEffect` for each one when operation supervision is enabled), every fiber started, every
 * suspension.
 */
class OperationCounter extends Supervisor.AbstractSupervisor<void> {
  on = false
  counts = { operations: 0, fibers: 0, suspensions: 0 }
  get value() {
    return Effect.void
  }
  override onStart() {
    if (this.on) this.counts.fibers++
  }
  override onSuspend() {
    if (this.on) this.counts.suspensions++
  }
  override onEffect() {
    if (this.on) this.counts.operations++
  }
}

/**
 * The operations, fibers and suspensions of one call of `run` (after a warm-up), counted by a
 * supervisor: a figure that does not move with the machine's load, unlike the times.
 */
export const operations = async (
  runtime: ManagedRuntime.ManagedRuntime<IdempotencyStore.IdempotencyStore, unknown>,
  run: (key: string) => Effect.Effect<unknown, unknown, IdempotencyStore.IdempotencyStore>
): Promise<{ readonly first: Operations; readonly replay: Operations }> => {
  const counter = new OperationCounter()
  const supervised = (key: string) =>
    run(key).pipe(
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)),
      Effect.supervised(counter)
    )
  const count = async (key: string): Promise<Operations> => {
    counter.counts = { operations: 0, fibers: 0, suspensions: 0 }
    counter.on = true
    await runtime.runPromise(supervised(key))
    counter.on = false
    return counter.counts
  }
  for (let i = 0; i < 100; i++) await count(`ops-warm-${i}`).then(() => count(`ops-warm-${i}`))
  const first = await count("ops-key")
  return { first, replay: await count("ops-key") }
}

/**
 * Runs `calls` first executions, then the `calls` replays of the same keys, and `calls` bare
 * downstream calls, every round, in one fiber (no `runPromise` per call): the difference is the
 * combinator and the memory store.
 */
export const overhead = (calls: number, rounds: number): Effect.Effect<OverheadResult> =>
  Effect.acquireUseRelease(
    Effect.sync(() => ManagedRuntime.make(IdempotencyStore.layerMemoryWith({ warn: false }))),
    (runtime) =>
      Effect.promise(async () => {
        const receipt = (payload: Payload): Receipt => ({ chargeId: `ch_${payload.customerId}`, amountCents: 1 })
        const execute = (payload: Payload) => Effect.succeed(receipt(payload))
        const operation = Idempotency.make({ name: "charge", payload: Payload, success: Receipt, execute })
        const bareLoop = (round: number) =>
          Effect.gen(function*() {
            for (let i = 0; i < calls; i++) yield* execute(payloadFor(`m-${round}-${i}`))
          })
        const runLoop = (round: number | string) =>
          Effect.gen(function*() {
            for (let i = 0; i < calls; i++) {
              const key = `m-${round}-${i}`
              yield* operation.run({ key, payload: payloadFor(key) })
            }
          })
        const { spans, tracer } = recordingTracer()
        const traced = (effect: Effect.Effect<void, unknown, IdempotencyStore.IdempotencyStore>) =>
          Effect.withTracer(effect, tracer)
        const perCall = (millis: number) => (millis * 1000) / calls
        // the CPU time of the last `time`, µs per call
        let lastCpu = 0
        const time = async (effect: Effect.Effect<void, unknown, IdempotencyStore.IdempotencyStore>) => {
          const cpuBefore = process.cpuUsage()
          const wall = await runtime.runPromise(timed(effect)).then(perCall)
          const cpu = process.cpuUsage(cpuBefore)
          lastCpu = (cpu.user + cpu.system) / calls
          return wall
        }
        const bareCpu: Array<number> = []
        const firstCpu: Array<number> = []
        const replayCpu: Array<number> = []
        // warm-up
        await time(bareLoop(-1))
        await time(runLoop(-1))
        await time(runLoop(-1))
        await time(traced(runLoop("t-1")))
        await time(traced(runLoop("t-1")))
        const bare: Array<number> = []
        const first: Array<number> = []
        const replay: Array<number> = []
        const firstTraced: Array<number> = []
        const replayTraced: Array<number> = []
        let spansFirst = 0
        let spansReplay = 0
        for (let round = 0; round < rounds; round++) {
          if (round % 2 === 0) {
            bare.push(await time(bareLoop(round)))
            bareCpu.push(lastCpu)
          }
          first.push(await time(runLoop(round)))
          firstCpu.push(lastCpu)
          replay.push(await time(runLoop(round)))
          replayCpu.push(lastCpu)
          const before = spans()
          firstTraced.push(await time(traced(runLoop(`t${round}`))))
          const between = spans()
          replayTraced.push(await time(traced(runLoop(`t${round}`))))
          spansFirst += between - before
          spansReplay += spans() - between
          if (round % 2 === 1) {
            bare.push(await time(bareLoop(round)))
            bareCpu.push(lastCpu)
          }
        }
        return {
          calls,
          rounds,
          bare,
          first,
          replay,
          firstOverhead: median(first.map((value, i) => value - bare[i]!)),
          replayOverhead: median(replay.map((value, i) => value - bare[i]!)),
          cpu: {
            bare: bareCpu,
            first: firstCpu,
            replay: replayCpu,
            firstOverhead: median(firstCpu.map((value, i) => value - bareCpu[i]!)),
            replayOverhead: median(replayCpu.map((value, i) => value - bareCpu[i]!))
          },
          firstFactor: pairedRatio(first, bare),
          firstTraced,
          replayTraced,
          firstTracedFactor: pairedRatio(firstTraced, first),
          replayTracedFactor: pairedRatio(replayTraced, replay),
          spansPerFirst: spansFirst / (calls * rounds),
          spansPerReplay: spansReplay / (calls * rounds),
          operations: await operations(runtime, (key) => operation.run({ key, payload: payloadFor(key) }))
        }
      }),
    (runtime) => Effect.promise(() => runtime.dispose())
  )

export interface HeapResult {
  readonly keys: number
  readonly purgeIntervalMillis: number
  /** Heap used after a full collection, before any record and with every record live, in bytes. */
  readonly heapBefore: number
  readonly heapWithRecords: number
  readonly bytesPerRecord: number
  readonly fillSeconds: number
  /** One `purgeExpired` while nothing has expired (what a background round costs then). */
  readonly purgeScanMillis: number
  /** Records the background purge deleted in `waitedMillis` after every record expired. */
  readonly purgedInBackground: number
  readonly waitedMillis: number
  /** One unbounded `purgeExpired` of the remaining expired records. */
  readonly purgeAllMillis: number
  readonly heapAfterPurge: number
}

const collect: () => void = (() => {
  v8.setFlagsFromString("--expose-gc")
  return vm.runInNewContext("gc") as () => void
})()

const heapUsed = (): number => {
  collect()
  collect()
  return process.memoryUsage().heapUsed
}

/** The live clock moved forward by `offset.millis`, to expire records without waiting. */
const shiftedClock = (offset: { millis: number }): Clock.Clock => {
  const base = Clock.make()
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis() + offset.millis,
    currentTimeMillis: Effect.sync(() => base.unsafeCurrentTimeMillis() + offset.millis),
    unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos() + BigInt(offset.millis) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => base.unsafeCurrentTimeNanos() + BigInt(offset.millis) * 1_000_000n),
    sleep: (duration) => base.sleep(duration)
  }
}

/**
 * Fills a memory store (with its background purge running every `purgeInterval`) with `keys`
 * completed records shaped like the combinator's (a UUID key, a SHA-256 fingerprint, a JSON
 * receipt, 24 hours of TTL), measures the heap, then moves the clock past the TTL and sees what
 * the purge reclaims.
 */
export const heap = (keys: number, purgeInterval: Duration.Duration): Effect.Effect<HeapResult> => {
  const offset = { millis: 0 }
  return Effect.gen(function*() {
    const heapBefore = heapUsed()
    const context = yield* Layer.build(IdempotencyStore.layerMemoryWith({ warn: false, purgeInterval }))
    const store = Context.get(context, IdempotencyStore.IdempotencyStore)
    const ttl = Duration.hours(24)
    const lease = Duration.seconds(31)
    const fillStart = performance.now()
    const chunk = 10_000
    for (let start = 0; start < keys; start += chunk) {
      for (let i = start; i < Math.min(keys, start + chunk); i++) {
        const key = randomUUID()
        const id = IdempotencyRecord.makeRecordId({ operation: "charge", key: IdempotencyKey.unsafeMake(key) })
        const token = randomUUID()
        const fingerprint = Fingerprint.fromEncoded(payloadFor(key))
        yield* store.reserve({ id, token, fingerprint, lease, ttl, takeover: true })
        yield* store.complete({
          id,
          token,
          ttl,
          outcome: IdempotencyRecord.StoredOutcome.Success({
            value: JSON.stringify({ chargeId: `ch_${key}`, amountCents: 1999 })
          })
        })
      }
      // let the background purge run between chunks, as it would between requests
      yield* Effect.sleep(0)
    }
    const fillSeconds = (performance.now() - fillStart) / 1000
    const heapWithRecords = heapUsed()
    const purgeScanMillis = yield* timed(store.purgeExpired())
    offset.millis = Duration.toMillis(ttl) + 60_000
    const waited = Duration.times(purgeInterval, 3)
    yield* Effect.sleep(waited)
    const start = performance.now()
    const remaining = yield* store.purgeExpired({ limit: Number.MAX_SAFE_INTEGER })
    const purgeAllMillis = performance.now() - start
    const heapAfterPurge = heapUsed()
    return {
      keys,
      purgeIntervalMillis: Duration.toMillis(purgeInterval),
      heapBefore,
      heapWithRecords,
      bytesPerRecord: (heapWithRecords - heapBefore) / keys,
      fillSeconds,
      purgeScanMillis,
      purgedInBackground: keys - remaining,
      waitedMillis: Duration.toMillis(waited),
      purgeAllMillis,
      heapAfterPurge
    }
  }).pipe(Effect.orDie, Effect.scoped, Effect.withClock(shiftedClock(offset)))
}
