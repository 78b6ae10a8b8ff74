/**
 * A view of the idempotency store for the report: it passes every call through to the real store,
 * notes each call in the journal, and remembers the record ids it was asked to reserve, so the
 * report can read back every record the run created, whatever the store.
 */
import type { IdempotencyRecord } from "@effect-idempotency/core"
import { IdempotencyStore } from "@effect-idempotency/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Journal from "./Journal.js"

export interface RecordView {
  readonly id: string
  readonly status: IdempotencyRecord.Status
  readonly attempt: number
  /** The recorded outcome: `Success`, `Failure`, `Timeout` (outcome unknown) or none yet. */
  readonly outcome: string
  /** The stored value of a `Success` outcome (the response the function recorded). */
  readonly value: string | undefined
}

export interface ObservedStore {
  readonly layer: Layer.Layer<IdempotencyStore.IdempotencyStore>
  /** The live records among those the run reserved. */
  readonly records: Effect.Effect<ReadonlyArray<RecordView>, unknown>
}

const describeOutcome = (outcome: IdempotencyRecord.StoredOutcome | undefined): string =>
  outcome === undefined ? "none" : outcome._tag === "Timeout" ? "Timeout (outcome unknown)" : outcome._tag

const describeReserve = (result: IdempotencyRecord.ReserveResult): string =>
  result._tag === "Reserved"
    ? `Reserved (attempt ${result.attempt}${result.attempt > 1 ? ", took over an expired lease" : ""})`
    : `Existing ${result.record.status}${
      result.record.status === "COMPLETED" ? `, outcome ${describeOutcome(result.record.outcome)}` : ""
    }${
      result.record.status === "IN_PROGRESS"
        ? `, lease ends in ${Math.max(0, result.record.leaseUntil - result.now)} ms`
        : ""
    }`

export const make = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  journal: Journal.Journal
): Effect.Effect<ObservedStore> =>
  Effect.sync(() => {
    const ids = new Map<string, IdempotencyRecord.RecordId>()
    const note = (text: string) => journal.add("store", text)
    const observed: IdempotencyStore.IdempotencyStore["Type"] = {
      reserve: (request) => {
        ids.set(request.id.value, request.id)
        return Effect.tap(store.reserve(request), (result) => note(`reserve → ${describeReserve(result)}`))
      },
      complete: (request) =>
        Effect.tap(store.complete(request), () =>
          note(`complete → COMPLETED, outcome ${describeOutcome(request.outcome)}`)),
      release: (request) =>
        Effect.tap(store.release(request), () => note("release → record deleted")),
      markFailed: (request) => Effect.tap(store.markFailed(request), () => note("markFailed → FAILED")),
      extend: (request) => store.extend(request),
      get: (id) => store.get(id),
      purgeExpired: (options) => store.purgeExpired(options)
    }
    const records = Effect.suspend(() =>
      Effect.forEach([...ids.values()], (id) =>
        Effect.map(
          store.get(id),
          Option.map((record): RecordView => ({
            id: id.value,
            status: record.status,
            attempt: record.attempt,
            outcome: describeOutcome(record.outcome),
            value: record.outcome?._tag === "Success" ? record.outcome.value : undefined
          }))
        ))
    ).pipe(Effect.map((found) => found.flatMap(Option.toArray)))
    return {
      layer: Layer.succeed(IdempotencyStore.IdempotencyStore, observed),
      records
    }
  })
