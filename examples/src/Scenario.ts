/**
 * The scenario of the verification, run three times against one store:
 *
 * 1. `withoutIdempotency`: a plain function. The downstream writes, answers after the time limit,
 *    the platform cuts the function off and retries: the retry writes a second order.
 * 2. `withIdempotency`: the idempotent function with the `markUnknown` timeout policy, against a
 *    downstream that ignores keys. The downstream call times out `margin` before the platform's
 *    cut-off and the function records "outcome unknown"; every retry replays that record
 *    (504, `Idempotent-Replayed: true`) without calling the downstream again: one order, one record.
 * 3. `withForwardedKey`: the idempotent function with the default `keepLease` policy, against a
 *    downstream that deduplicates by `Idempotency-Key`. The record keeps its lease after the
 *    timeout (retries get 409 with `Retry-After`); the first retry after the lease takes the record
 *    over and sends the same forwarded key; the downstream answers with the order it stored, and
 *    the function records that response: one order, one record, the real result.
 */
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import type { NetlifyFunction } from "@effect-idempotency/netlify"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
import * as Downstream from "./Downstream.js"
import * as Journal from "./Journal.js"
import * as ObservedStore from "./ObservedStore.js"
import * as OrderFunction from "./OrderFunction.js"
import * as OrderServer from "./OrderServer.js"
import * as Platform from "./Platform.js"
import type * as Stores from "./Stores.js"

export interface Settings {
  /** The function's time limit (Netlify: 10 s by default). */
  readonly timeLimit: Duration.DurationInput
  /** What the idempotent function keeps between its downstream timeout and the time limit. */
  readonly margin: Duration.DurationInput
  /** The platform's retry delays (Netlify: 1 and 2 minutes). */
  readonly retryDelays: ReadonlyArray<Duration.DurationInput>
  /** How much later than the time limit the downstream answers its first request. */
  readonly lateBy: Duration.DurationInput
}

export const defaults: Settings = {
  timeLimit: "1 second",
  margin: "250 millis",
  retryDelays: ["200 millis", "400 millis"],
  lateBy: "250 millis"
}

export type RunName = "withoutIdempotency" | "withIdempotency" | "withForwardedKey"

export interface Run {
  readonly name: RunName
  readonly title: string
  readonly explanation: string
  /** The idempotent function's timeout policy, if any. */
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy | undefined
  readonly dedupByKey: boolean
  readonly key: string
  readonly attempts: ReadonlyArray<Platform.Attempt>
  readonly downstreamRequests: ReadonlyArray<Downstream.DownstreamRequest>
  readonly orders: ReadonlyArray<Downstream.OrderRow>
  readonly records: ReadonlyArray<ObservedStore.RecordView>
  /** The rows of the client key counted in the store's table (SQL stores). */
  readonly tableRows: number | undefined
  /** How `tableRows` was counted, when not by SQL. */
  readonly tableRowsLabel?: string | undefined
  /** A retry got a stored outcome instead of writing again. */
  readonly replayed: boolean
  readonly replayedBy: "idempotency store" | "downstream (forwarded key)" | undefined
  readonly timeline: ReadonlyArray<Journal.Entry>
}

export interface Report {
  readonly store: string
  readonly settings: Settings
  /** What the platform invokes: the Netlify function, or the same work behind an HTTP server. */
  readonly via: Via
  readonly runs: ReadonlyArray<Run>
}

/**
 * `function`: the Netlify function (`@effect-idempotency/netlify`), invoked in process and stopped
 * at its time limit. `server`: an `HttpRouter` route with `IdempotencyMiddleware` on a loopback
 * `NodeHttpServer`, called over the network with the time limit as its cut-off.
 */
export type Via = "function" | "server"

export interface RunSpec {
  readonly name: RunName
  readonly title: string
  readonly explanation: string
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy | undefined
  readonly dedupByKey: boolean
}

export const specs: ReadonlyArray<RunSpec> = [
  {
    name: "withoutIdempotency",
    title: "without idempotency",
    explanation: "The retry runs the write again: the downstream now holds two orders.",
    onTimeout: undefined,
    dedupByKey: false
  },
  {
    name: "withIdempotency",
    title: "with idempotency (timeout policy markUnknown)",
    explanation: "The downstream call timed out before the cut-off and the function recorded \"outcome unknown\". " +
      "Every retry replayed that record without calling the downstream: one order, one record. The write " +
      "happened; reconcile it by the key (at-most-once, never twice).",
    onTimeout: "markUnknown",
    dedupByKey: false
  },
  {
    name: "withForwardedKey",
    title: "with idempotency and a downstream that deduplicates by the forwarded key (timeout policy keepLease)",
    explanation: "The record kept its lease after the timeout; once it ended, a retry took the record over and " +
      "sent the same derived Idempotency-Key. The downstream answered with the order it had stored; the function " +
      "recorded that response: one order, one record, and the client gets the real result.",
    onTimeout: "keepLease",
    dedupByKey: true
  }
]

const runOne = (spec: RunSpec, store: Stores.Store, settings: Settings, via: Via) =>
  Effect.scoped(Effect.gen(function*() {
    const journal = yield* Journal.make
    const timeLimit = Duration.decode(settings.timeLimit)
    const downstream = yield* Downstream.make({
      dedupByKey: spec.dedupByKey,
      firstResponseDelay: Duration.sum(timeLimit, Duration.decode(settings.lateBy)),
      journal
    })
    const observed = yield* ObservedStore.make(store.store, journal)
    const options = { downstreamUrl: downstream.url, timeLimit, logger: journal.logger }
    const protectedOptions = spec.onTimeout === undefined ? undefined : {
      ...options,
      store: observed.layer,
      margin: settings.margin,
      onTimeout: spec.onTimeout
    }
    const handler: NetlifyFunction.Handler = via === "server"
      ? yield* (protectedOptions === undefined
        ? OrderServer.unprotected(options)
        : OrderServer.idempotent(protectedOptions))
      : yield* Effect.acquireRelease(
        Effect.sync(() =>
          protectedOptions === undefined
            ? OrderFunction.unprotected(options)
            : OrderFunction.idempotent(protectedOptions)
        ),
        (handler) => Effect.promise(() => handler.dispose())
      )
    const key = randomUUID()
    const attempts = yield* Platform.run(
      handler,
      {
        url: "http://127.0.0.1/.netlify/functions/create-order",
        headers: { "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify({ sku: "BOOK-42", quantity: 1 })
      },
      { timeLimit, retryDelays: settings.retryDelays },
      journal
    )
    const later = attempts.slice(1).flatMap((attempt) => Option.toArray(attempt.response))
    const replayedBy = later.some((response) => response.replayed)
      ? "idempotency store" as const
      : later.some((response) => response.body.includes("\"downstreamReplayed\":true"))
      ? "downstream (forwarded key)" as const
      : undefined
    return {
      name: spec.name,
      title: spec.title,
      explanation: spec.explanation,
      onTimeout: spec.onTimeout,
      dedupByKey: spec.dedupByKey,
      key,
      attempts,
      downstreamRequests: yield* downstream.requests,
      orders: yield* downstream.orders,
      records: yield* observed.records,
      tableRows: store.rowsOfKey === undefined ? undefined : yield* store.rowsOfKey(key),
      tableRowsLabel: store.rowsOfKeyLabel,
      replayed: replayedBy !== undefined,
      replayedBy,
      timeline: yield* journal.entries
    } satisfies Run
  }))

/** Runs the three runs (or others) one after the other against `store`. */
export const run = (
  store: Stores.Store,
  settings: Settings = defaults,
  runs: ReadonlyArray<RunSpec> = specs,
  via: Via = "function"
): Effect.Effect<Report, unknown> =>
  Effect.map(
    Effect.forEach(runs, (spec) => runOne(spec, store, settings, via)),
    (runs) => ({ store: store.description, settings, via, runs })
  )

/** What the verification demands: each protected run ends with one downstream order and one record. */
export const failures = (report: Report): ReadonlyArray<string> =>
  report.runs.flatMap((run) => {
    if (run.name === "withoutIdempotency") return []
    const problems: Array<string> = []
    if (run.orders.length !== 1) problems.push(`${run.name}: ${run.orders.length} downstream records, expected 1`)
    if (run.records.length !== 1) problems.push(`${run.name}: ${run.records.length} idempotency records, expected 1`)
    if (run.tableRows !== undefined && run.tableRows !== 1) {
      problems.push(`${run.name}: ${run.tableRows} rows for the key in the store's table, expected 1`)
    }
    if (!run.replayed) problems.push(`${run.name}: no retry got the stored result`)
    return problems
  })
