/**
 * What the stores' suites share around their contenders: the records' lifetimes, the baselines'
 * constant fingerprint and their conflict, a replay floor's reading of a found record, Powertools'
 * `makeIdempotent` as a contender, and the raw baseline sent through `SqlClient`.
 */
import { IdempotencyAlreadyInProgressError, makeIdempotent } from "@aws-lambda-powertools/idempotency"
import type { IdempotencyLambdaHandlerOptions } from "@aws-lambda-powertools/idempotency/types"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import { randomUUID } from "node:crypto"
import type { Contender } from "./Suite.js"
import type { Payload } from "./Workload.js"
import { Downstream, payloadFor } from "./Workload.js"

/** How long a completed record lives: 24 hours. */
export const TTL_SECONDS = 24 * 60 * 60
export const TTL_MILLIS = TTL_SECONDS * 1000
/** An attempt's lease, as the stores' default. */
export const LEASE_MILLIS = 31_000
/** The baselines' fingerprint: a constant (no hashing). */
export const FINGERPRINT = "sha256:0000"

/** A baseline's refusal: the key is held by another attempt, or recorded for another payload. */
export class Conflict extends Error {}

/** What a baseline does with the record it found: the outcome of a completed record of its payload, else `Conflict`. */
export const replayed = (
  record: { readonly status: unknown; readonly fingerprint: unknown; readonly outcome: unknown } | undefined
): unknown => {
  if (record === undefined || record.status !== "COMPLETED" || record.fingerprint !== FINGERPRINT) {
    throw new Conflict()
  }
  return JSON.parse(String(record.outcome ?? "null"))
}

/** A baseline named `name`: its calls (made with its own downstream) refuse with `Conflict`. */
export const baseline = (
  name: string,
  roundTrips: () => number,
  calls: (downstream: Downstream) => Pick<Contender, "call" | "replay">
): Contender => {
  const downstream = new Downstream()
  return { name, downstream, ...calls(downstream), isConflict: (error) => error instanceof Conflict, roundTrips }
}

/** The part of a Lambda context Powertools reads. */
interface LambdaContext {
  readonly functionName: string
  readonly awsRequestId: string
  readonly getRemainingTimeInMillis: () => number
}

interface ChargeEvent {
  readonly key: string
  readonly payload: Payload
}

/**
 * Powertools' `makeIdempotent` around the charge, with `options` (its persistence layer and its
 * configuration): the key is the event's `key`, and the Lambda context is registered on every call
 * (so the in-progress expiry is set and nothing is logged).
 */
export const powertools = (
  name: string,
  options: IdempotencyLambdaHandlerOptions,
  roundTrips: () => number
): Contender => {
  const downstream = new Downstream()
  const context: LambdaContext = {
    functionName: "charge",
    awsRequestId: randomUUID(),
    getRemainingTimeInMillis: () => LEASE_MILLIS
  }
  const handler = makeIdempotent(
    async (event: ChargeEvent, _context: LambdaContext) => downstream.charge(event.payload),
    options
  )
  return {
    name,
    downstream,
    call: (key) => handler({ key, payload: payloadFor(key) }, context),
    isConflict: (error) => error instanceof IdempotencyAlreadyInProgressError,
    roundTrips
  }
}

/**
 * The raw baseline through `SqlClient`: an INSERT and an UPDATE per first execution, a SELECT by
 * primary key per replay or conflict, each sent with `sql.unsafe` and nothing else. `insertParams`
 * and `updateParams` order the values as the dialect's statements take them.
 */
export const rawSqlClient = (options: {
  readonly name: string
  readonly runtime: Pick<ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>, "runPromise">
  readonly statements: { readonly insert: string; readonly update: string; readonly select: string }
  readonly insertParams: (key: string) => ReadonlyArray<unknown>
  readonly updateParams: (key: string, outcome: string) => ReadonlyArray<unknown>
  readonly roundTrips: () => number
}): Contender => {
  const { runtime, statements } = options
  return baseline(options.name, options.roundTrips, (downstream) => ({
    call: (key) =>
      runtime.runPromise(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe(statements.insert, options.insertParams(key)).withoutTransform
        const receipt = yield* Effect.promise(async () => downstream.charge(payloadFor(key)))
        yield* sql.unsafe(statements.update, options.updateParams(key, JSON.stringify(receipt))).withoutTransform
        return receipt
      })),
    replay: (key) =>
      runtime.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql.unsafe<{ readonly status: string; readonly fingerprint: string; readonly outcome: unknown }>(
              statements.select,
              [`charge#${key}`]
            ).withoutTransform
        )
      ).then((rows) => replayed(rows[0]))
  }))
}
