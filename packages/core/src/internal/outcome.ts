/**
 * An operation's outcomes as records hold them, shared by the engine and the transactional modes
 * (README.md#engines-of-your-own); a synchronous schema's step is read at once, as a plain `Either`.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import type { Result } from "../Attempt.js"
import {
  describeParseError,
  DownstreamTimeout,
  OutcomeNotReplayable,
  StoredOutcomeInvalid
} from "../IdempotencyError.js"
import type { IdempotencyRecord } from "../IdempotencyRecord.js"
import { StoredOutcome } from "../IdempotencyRecord.js"

/** How a run ends when it does not fail: done, or refused with an error as data (`outcome`: the span's). */
export type Ended<A> =
  | { readonly _tag: "Done"; readonly result: Result<A> }
  | { readonly _tag: "Refused"; readonly error: unknown; readonly outcome: string }

/** The empty text is a top-level `undefined`, which no JSON text is, so `Schema.UndefinedOr` replays it. */
export const parseJson = (text: string): Either.Either<unknown, Cause.UnknownException> => {
  if (text === "") return Either.right(undefined)
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (error) {
    return Either.left(new Cause.UnknownException(error))
  }
}

const toJson = (value: unknown): Either.Either<string, Cause.UnknownException> => {
  if (value === undefined) return Either.right("")
  try {
    return Either.right(JSON.stringify(value) ?? "null")
  } catch (error) {
    return Either.left(new Cause.UnknownException(error))
  }
}

/** `Effect.flatMap`, at once when `self` is a plain `Either` (what a synchronous schema gives). */
export const flatMapEager = <A, E, B, E2>(
  self: Effect.Effect<A, E>,
  step: (a: A) => Effect.Effect<B, E2>
): Effect.Effect<B, E | E2> => {
  if (!Either.isEither(self)) return Effect.flatMap(self, step)
  const known = self as Either.Either<A, E>
  return Either.isLeft(known) ? known as Either.Either<never, E> : step(known.right)
}

export const endWith = <A, E, B>(
  self: Effect.Effect<A, E>,
  onFailure: (error: E) => B,
  onSuccess: (value: A) => B
): Effect.Effect<B> => {
  if (!Either.isEither(self)) return Effect.match(self, { onFailure, onSuccess })
  const known = self as Either.Either<A, E>
  return Effect.succeed(Either.isLeft(known) ? onFailure(known.left) : onSuccess(known.right))
}

const SCHEMA_THREW = "the schema threw"

/** What a schema step throws or dies with is its failure: an encoder that throws leaves an outcome to keep. */
export const guarded = <X, Y>(
  step: (input: X) => Effect.Effect<Y, ParseResult.ParseError>
): (input: X) => Effect.Effect<Y, ParseResult.ParseError | Cause.UnknownException> =>
(input) => {
  let result: Effect.Effect<Y, ParseResult.ParseError>
  try {
    result = step(input)
  } catch (error) {
    return Either.left(new Cause.UnknownException(error, SCHEMA_THREW))
  }
  return Either.isEither(result)
    ? result
    : Effect.catchAllDefect(result, (defect) => Effect.fail(new Cause.UnknownException(defect, SCHEMA_THREW)))
}

/** What went wrong when an outcome was encoded, bounded, without the value itself. */
const encodeFailureReason = (error: ParseResult.ParseError | Cause.UnknownException): string => {
  if (error._tag === "ParseError") return `it does not encode with the schema (${describeParseError(error)})`
  const name = String((error.error as { readonly name?: unknown } | undefined)?.name ?? "error")
  return error.message === SCHEMA_THREW ? `its schema threw (${name})` : `its encoding is not JSON (${name})`
}

export interface Steps<A, E> {
  readonly encodeSuccess: (value: A) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly decodeSuccess: (input: unknown) => Effect.Effect<A, ParseResult.ParseError>
  readonly encodeFailure: ((error: E) => Effect.Effect<unknown, ParseResult.ParseError>) | undefined
  readonly decodeFailure: ((input: unknown) => Effect.Effect<unknown, ParseResult.ParseError>) | undefined
}

/** A success as recorded: its JSON text and the value a replay gets, or why it cannot be replayed. */
export type EncodedSuccess<A> = Either.Either<{ readonly json: string; readonly value: A }, string>

export interface Codec<A, E> {
  readonly success: (value: A) => Effect.Effect<EncodedSuccess<A>>
  /** `Omitted` when it does not encode: kept, never released (`store` did not choose a retry). */
  readonly failure: (error: E) => Effect.Effect<StoredOutcome>
  readonly replay: (record: IdempotencyRecord, key: string, timeoutMs: number) => Effect.Effect<Ended<A>>
}

export const make = <A, E>(name: string, steps: Steps<A, E>): Codec<A, E> => {
  const encodeSuccess = guarded(steps.encodeSuccess)
  const decodeSuccess = guarded(steps.decodeSuccess)
  const encodeFailure = steps.encodeFailure === undefined ? undefined : guarded(steps.encodeFailure)
  const decodeFailure = steps.decodeFailure === undefined ? undefined : guarded(steps.decodeFailure)

  const success = (value: A): Effect.Effect<EncodedSuccess<A>> => {
    // the caller gets the value a replay would get: the recorded text, decoded
    const encoded = flatMapEager(
      encodeSuccess(value),
      (encoded) =>
        flatMapEager(
          toJson(encoded),
          (json) => flatMapEager(flatMapEager(parseJson(json), decodeSuccess), (value) => Either.right({ json, value }))
        )
    )
    const onFailure = (error: ParseResult.ParseError | Cause.UnknownException): EncodedSuccess<A> =>
      Either.left(encodeFailureReason(error))
    if (!Either.isEither(encoded)) return Effect.match(encoded, { onFailure, onSuccess: Either.right })
    const known = encoded as Either.Either<
      { readonly json: string; readonly value: A },
      ParseResult.ParseError | Cause.UnknownException
    >
    return Either.right(Either.isLeft(known) ? onFailure(known.left) : Either.right(known.right))
  }

  const notEncoded = StoredOutcome.Omitted({ reason: "a failure chosen for `store` does not encode" })
  const failure = (error: E): Effect.Effect<StoredOutcome> =>
    encodeFailure === undefined
      ? Effect.as(warnNotEncoded, notEncoded)
      : endWith(
        flatMapEager(encodeFailure(error), toJson),
        () => undefined,
        (json): StoredOutcome | undefined => StoredOutcome.Failure({ error: json })
      ).pipe(Effect.flatMap((outcome) =>
        outcome === undefined ? Effect.as(warnNotEncoded, notEncoded) : Effect.succeed(outcome)
      ))

  const replay = (record: IdempotencyRecord, key: string, timeoutMs: number): Effect.Effect<Ended<A>> => {
    const refused = (error: unknown): Ended<A> => ({ _tag: "Refused", error, outcome: "replayed" })
    const invalid = (cause: unknown): Ended<A> => ({
      _tag: "Refused",
      error: new StoredOutcomeInvalid({ operation: name, key, cause }),
      outcome: "StoredOutcomeInvalid"
    })
    const outcome = record.outcome
    if (outcome === undefined) return Effect.succeed(invalid("a COMPLETED record without an outcome"))
    switch (outcome._tag) {
      case "Success":
        return endWith(
          flatMapEager(parseJson(outcome.value), decodeSuccess),
          invalid,
          (value): Ended<A> => ({
            _tag: "Done",
            result: { value, replayed: true, attempt: record.attempt, recorded: true }
          })
        )
      case "Failure": {
        if (decodeFailure === undefined) return Effect.succeed(invalid("a stored failure, but no failure schema"))
        return endWith(flatMapEager(parseJson(outcome.error), decodeFailure), invalid, refused)
      }
      case "Timeout":
        return Effect.as(
          Effect.logDebug(`idempotency: ${name} replayed an unknown outcome (an earlier attempt timed out or crashed)`),
          refused(
            new DownstreamTimeout({
              operation: name,
              key,
              timeoutMillis: timeoutMs,
              policy: "markUnknown",
              replayed: true
            })
          )
        )
      case "Omitted":
        return Effect.succeed(
          refused(new OutcomeNotReplayable({ operation: name, key, reason: outcome.reason, replayed: true }))
        )
    }
  }

  return { success, failure, replay }
}

const warnNotEncoded = Effect.logWarning(
  "idempotency: a failure chosen for `store` does not encode; its record is kept without it"
)
