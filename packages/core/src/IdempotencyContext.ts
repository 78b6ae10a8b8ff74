/**
 * What the downstream effect of an idempotent operation can read about the attempt it runs in:
 * the validated key, and a stable key per downstream step to forward to APIs that accept an
 * `Idempotency-Key` header.
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
    /** The validated key of the request. */
    readonly key: IdempotencyKey
    /** The fencing token this attempt holds. */
    readonly token: string
    /** 1 for the first execution, incremented by every takeover. */
    readonly attempt: number
    /**
     * A key derived from the record id and a step name: the same on every retry of the request,
     * distinct per step, operation and scope. Forward it to a downstream API's `Idempotency-Key`.
     */
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
