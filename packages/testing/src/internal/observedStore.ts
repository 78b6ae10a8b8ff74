import type { IdempotencyRecord } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as TestServices from "effect/TestServices"
import * as format from "./format.js"
import * as trace from "./trace.js"

/** @internal */
export interface ReserveSeen {
  readonly seq: number
  readonly at: number
  readonly attempt: string | undefined
  readonly result: IdempotencyRecord.ReserveResult
}

/** @internal */
export interface CompletionSeen {
  readonly seq: number
  readonly at: number
  readonly attempt: string | undefined
  readonly token: string
  readonly outcome: IdempotencyRecord.StoredOutcome
  readonly expiresAt: number
}

/** @internal */
export interface Seen {
  seq: number
  readonly reserves: Array<ReserveSeen>
  readonly completions: Array<CompletionSeen>
  /** The latest end of a lease the operation asked for (by a reservation or a heartbeat). */
  leaseEnd: number
}

/** @internal */
export const spyStore = (
  base: IdempotencyStore.IdempotencyStore["Type"],
  start: number,
  seen: Seen
): IdempotencyStore.IdempotencyStore["Type"] => {
  const at = (ms: number) => format.offset(ms - start)
  const failed = (method: string) => (error: { readonly _tag: string }) =>
    trace.record("store", `${method}: ${error._tag}`)
  const attempt = FiberRef.get(trace.currentAttempt)
  return {
    ...base,
    reserve: (request) =>
      base.reserve(request).pipe(
        Effect.tap((result) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            seen.reserves.push({ seq: seen.seq++, at: now, attempt: yield* attempt, result })
            if (result._tag === "Reserved") {
              seen.leaseEnd = Math.max(seen.leaseEnd, now + Duration.toMillis(request.lease))
              return yield* trace.record(
                "store",
                `reserve: reserved (execution ${result.attempt}, lease until ${at(result.leaseUntil)})`
              )
            }
            const record = result.record
            const detail = record.status === "IN_PROGRESS"
              ? ` (lease until ${at(record.leaseUntil)})`
              : record.status === "COMPLETED" && record.outcome !== undefined
              ? ` (${record.outcome._tag})`
              : ""
            yield* trace.record("store", `reserve: found ${record.status}${detail}`)
          })
        ),
        Effect.tapError(failed("reserve"))
      ),
    complete: (request) =>
      base.complete(request).pipe(
        Effect.tap(() =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            seen.completions.push({
              seq: seen.seq++,
              at: now,
              attempt: yield* attempt,
              token: request.token,
              outcome: request.outcome,
              expiresAt: now + Duration.toMillis(request.ttl)
            })
            yield* trace.record("store", `complete: recorded ${request.outcome._tag}`)
          })
        ),
        Effect.tapError(failed("complete"))
      ),
    release: (request) =>
      base.release(request).pipe(
        Effect.tap(() => trace.record("store", "release: record deleted")),
        Effect.tapError(failed("release"))
      ),
    markFailed: (request) =>
      base.markFailed(request).pipe(
        Effect.tap(() => trace.record("store", "markFailed: record kept as FAILED")),
        Effect.tapError(failed("markFailed"))
      ),
    extend: (request) =>
      base.extend(request).pipe(
        Effect.tap(() =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            seen.leaseEnd = Math.max(seen.leaseEnd, now + Duration.toMillis(request.lease))
            return trace.record("store", "extend: lease extended")
          })
        ),
        Effect.tapError(failed("extend"))
      )
  }
}

const MAX_SETTLE_POLLS = 10_000

/**
 * `settle` waits until no request has been in flight for two polls in a row.
 *
 * @internal
 */
export const trackInFlight = (base: IdempotencyStore.IdempotencyStore["Type"]) => {
  let inFlight = 0
  let started = 0
  const track = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      inFlight++
      started++
      return Effect.ensuring(
        effect,
        Effect.sync(() => {
          inFlight--
        })
      )
    })
  const poll = TestServices.provideLive(Effect.sleep(Duration.millis(1)))
  const settle = Effect.gen(function*() {
    let quiet = 0
    for (let i = 0; i < MAX_SETTLE_POLLS && quiet < 2; i++) {
      const before = started
      yield* poll
      quiet = inFlight === 0 && started === before ? quiet + 1 : 0
    }
  })
  const store: IdempotencyStore.IdempotencyStore["Type"] = {
    reserve: (request) => track(base.reserve(request)),
    complete: (request) => track(base.complete(request)),
    release: (request) => track(base.release(request)),
    markFailed: (request) => track(base.markFailed(request)),
    extend: (request) => track(base.extend(request)),
    get: (id) => track(base.get(id)),
    purgeExpired: (options) => track(base.purgeExpired(options))
  }
  return { store, settle }
}
