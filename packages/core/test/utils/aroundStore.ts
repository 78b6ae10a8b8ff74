/**
 * A store whose calls run through a function told their method: to count, fail or log what
 * reaches the store.
 */
import type { IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import type * as Effect from "effect/Effect"

type Store = IdempotencyStore.IdempotencyStore["Type"]

/** The name of a store call. */
export type Method = keyof Store

/** `base` with each call but those of `untouched` run through `f`. */
export const aroundStore = (
  base: Store,
  f: <A, E>(method: Method, call: Effect.Effect<A, E>) => Effect.Effect<A, E | IdempotencyError.StoreFailure>,
  untouched: ReadonlyArray<Method> = []
): Store =>
  Object.fromEntries(
    Object.entries(base).map(([method, call]: [string, (input: never) => Effect.Effect<unknown, unknown>]) => [
      method,
      untouched.includes(method as Method) ? call : (input: never) => f(method as Method, call(input))
    ])
  ) as unknown as Store
