/**
 * Stores wrapped call by call, for tests that count, fail or log what reaches a store.
 *
 * @example
 * const base = yield* IdempotencyStore.makeMemory({ warn: false })
 * const reached: Array<string> = []
 * const store = KitStores.around(base, (method, call) => Effect.zipRight(Effect.sync(() => reached.push(method)), call))
 */
import type { IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import type * as Effect from "effect/Effect"

type Store = IdempotencyStore.IdempotencyStore["Type"]

/** The calls of a store, in the order of its interface. */
export const methods = ["reserve", "complete", "release", "markFailed", "extend", "get", "purgeExpired"] as const

/** The name of a store call. */
export type Method = (typeof methods)[number]

/** What runs around a call: told its method, it may fail as a store does. */
export type Around = <A, E>(
  method: Method,
  call: Effect.Effect<A, E>
) => Effect.Effect<A, E | IdempotencyError.StoreFailure>

/** `base` with every call run through `around`, but those of `untouched`, left as they are. */
export const around = (base: Store, around: Around, untouched: ReadonlyArray<Method> = []): Store =>
  Object.fromEntries(methods.map((method) => {
    const call = base[method] as (input: never) => Effect.Effect<unknown, unknown>
    return [method, untouched.includes(method) ? call : (input: never) => around(method, call(input))]
  })) as unknown as Store
