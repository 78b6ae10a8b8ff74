/**
 * The store of a durable function's replay (README.md#durable-functions): a record in progress with
 * the replay's payload is the execution's own, reserved by an earlier invocation that the SDK suspended,
 * so the replay adopts it (its lease extended under its fencing token) instead of answering a conflict.
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyRecord } from "@effect-idempotency/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

type Store = IdempotencyStore.IdempotencyStore["Type"]

/** The store as one replay sees it (read by the tests, so not stripped from the declarations). */
export const adopting = (store: Store): Store => {
  // the engine's token of this attempt, and the earlier invocation's token that it writes with
  const adopted = new Map<string, string>()
  const earlier = new Map<string, string>()
  const tokenOf = (token: string) => adopted.get(token) ?? token
  return {
    ...store,
    reserve: (request) =>
      Effect.flatMap(store.reserve(request), (result) => {
        if (result._tag !== "Existing") return Effect.succeed(result)
        const { now, record } = result
        if (record.status !== "IN_PROGRESS" || record.fingerprint !== request.fingerprint) {
          return Effect.succeed(result)
        }
        return store.extend({ id: request.id, token: record.token, lease: request.lease }).pipe(
          Effect.map(() => {
            adopted.set(request.token, record.token)
            earlier.set(record.token, request.token)
            const leaseUntil = now + Duration.toMillis(request.lease)
            return IdempotencyRecord.ReserveResult.Reserved({
              token: request.token,
              attempt: record.attempt,
              leaseUntil,
              expiresAt: Math.max(record.expiresAt, leaseUntil)
            })
          }),
          // taken over, or ended, since it was read: what is there now decides, as for any reservation
          Effect.catchTag("LeaseLost", () => store.reserve(request))
        )
      }),
    complete: (request) => store.complete({ ...request, token: tokenOf(request.token) }),
    release: (request) => store.release({ ...request, token: tokenOf(request.token) }),
    markFailed: (request) => store.markFailed({ ...request, token: tokenOf(request.token) }),
    extend: (request) => store.extend({ ...request, token: tokenOf(request.token) }),
    // a record written under the adopted token is this attempt's, as the engine checks a lost answer
    get: (id) =>
      Effect.map(store.get(id), (found) =>
        Option.map(found, (record) => {
          const token = earlier.get(record.token)
          return token === undefined ? record : { ...record, token }
        }))
  }
}
