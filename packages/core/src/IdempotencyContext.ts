/**
 * What the downstream of an idempotent operation can read about its attempt (README.md#idempotencycontext).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Sha256 from "./base/sha256.js"
import type { IdempotencyKey } from "./IdempotencyKey.js"
import type { RecordId } from "./IdempotencyRecord.js"

/**
 * The current attempt of an idempotent operation.
 *
 * @since 0.1.0
 * @category tags
 */
export class IdempotencyContext extends Context.Tag("@effect-idempotency/core/IdempotencyContext")<
  IdempotencyContext,
  {
    readonly id: RecordId
    readonly key: IdempotencyKey
    readonly token: string
    readonly attempt: number
    /** The same on every retry, distinct per step, operation and scope. */
    readonly stepKey: (step: string) => IdempotencyKey
  }
>() {}

/**
 * Derives the key of a downstream step: base64url of SHA-256 over the record id and the step.
 *
 * @since 0.1.0
 * @category constructors
 */
export const deriveStepKey = (id: RecordId, step: string): IdempotencyKey =>
  Sha256.base64url(Sha256.digestUtf8(id.value, "\u0000", step)) as IdempotencyKey

/**
 * Builds the context of an attempt.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly id: RecordId
  readonly token: string
  readonly attempt: number
}): IdempotencyContext["Type"] => {
  const cache = new Map<string, IdempotencyKey>()
  return {
    id: options.id,
    key: options.id.key,
    token: options.token,
    attempt: options.attempt,
    stepKey: (step) => {
      let key = cache.get(step)
      if (key === undefined) {
        key = deriveStepKey(options.id, step)
        cache.set(step, key)
      }
      return key
    }
  }
}

/**
 * The key of a downstream step of the current attempt.
 *
 * @since 0.1.0
 * @category accessors
 */
export const stepKey = (step: string): Effect.Effect<IdempotencyKey, never, IdempotencyContext> =>
  Effect.map(IdempotencyContext, (context) => context.stepKey(step))

/**
 * The current attempt, if the effect runs inside an idempotent operation.
 *
 * @since 0.1.0
 * @category accessors
 */
export const current: Effect.Effect<Option.Option<IdempotencyContext["Type"]>> = Effect.serviceOption(
  IdempotencyContext
)
