/**
 * An operation's outcomes as its records hold them, for engines of your own (README.md#engines-of-your-own).
 *
 * @example
 * ```ts
 * import { OutcomeCodec } from "@effect-idempotency/core"
 * import { Effect, Schema } from "effect"
 *
 * const codec = OutcomeCodec.make({ name: "create-order", success: Schema.Struct({ orderId: Schema.String }) })
 *
 * const program = Effect.gen(function*() {
 *   const encoded = yield* codec.encodeSuccess({ orderId: "o-1" })
 *   // encoded.outcome is what a record stores: StoredOutcome.Success({ value: '{"orderId":"o-1"}' })
 *   return encoded
 * })
 * ```
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { Result } from "./Idempotency.js"
import type { IdempotencyError } from "./IdempotencyError.js"
import type { IdempotencyRecord } from "./IdempotencyRecord.js"
import { StoredOutcome } from "./IdempotencyRecord.js"
import * as internal from "./internal/outcome.js"

/**
 * A success as a record stores it (`outcome`), with the value a replay would decode from it.
 *
 * @since 0.1.0
 * @category models
 */
export type EncodedSuccess<A> =
  | { readonly _tag: "Encoded"; readonly outcome: StoredOutcome; readonly value: A }
  | { readonly _tag: "NotEncoded"; readonly outcome: StoredOutcome; readonly reason: string }

/**
 * The outcomes of one operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutcomeCodec<A, E> {
  readonly name: string
  /** `Success`, or `Omitted` when it does not encode. */
  readonly encodeSuccess: (value: A) => Effect.Effect<EncodedSuccess<A>>
  /** `Failure`, or `Omitted` when it does not encode (logged). */
  readonly encodeFailure: (error: unknown) => Effect.Effect<StoredOutcome>
  /** A COMPLETED record's outcome as the end of a run, as `Idempotency.make` replays it. */
  readonly replay: (
    record: IdempotencyRecord,
    options: { readonly key: string; readonly timeoutMillis: number }
  ) => Effect.Effect<Result<A>, E | IdempotencyError>
}

/**
 * The codec of an operation with these schemas, as `Idempotency.make` uses them.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, IA, EF = never, IEF = never>(options: {
  readonly name: string
  readonly success: Schema.Schema<A, IA>
  readonly failure?: Schema.Schema<EF, IEF> | undefined
}): OutcomeCodec<A, EF> => {
  const failure = options.failure
  const codec = internal.make<A, unknown>(options.name, {
    encodeSuccess: Schema.encode(options.success),
    decodeSuccess: Schema.decodeUnknown(options.success),
    encodeFailure: failure === undefined ? undefined : Schema.encodeUnknown(failure),
    decodeFailure: failure === undefined ? undefined : Schema.decodeUnknown(failure)
  })
  return {
    name: options.name,
    encodeSuccess: (value) =>
      Effect.map(codec.success(value), (encoded): EncodedSuccess<A> =>
        Either.isRight(encoded)
          ? {
            _tag: "Encoded",
            outcome: StoredOutcome.Success({ value: encoded.right.json }),
            value: encoded.right.value
          }
          : { _tag: "NotEncoded", outcome: StoredOutcome.Omitted({ reason: encoded.left }), reason: encoded.left }),
    encodeFailure: codec.failure,
    replay: (record, { key, timeoutMillis }) =>
      Effect.flatMap(
        codec.replay(record, key, timeoutMillis),
        (ended) =>
          ended._tag === "Done"
            ? Effect.succeed(ended.result)
            : Effect.fail(ended.error as EF | IdempotencyError)
      )
  }
}
