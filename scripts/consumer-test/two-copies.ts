/**
 * Two copies of the core in one application, as a version drift installs them: the error guards
 * of one copy recognise the other copy's errors (their type id is a registered symbol), where
 * `instanceof` does not; an error of the user's own that shares a tag is not recognised; and one
 * copy's operations run on the other copy's store (the service tag is a shared key).
 */
import * as A from "@effect-idempotency/core"
import * as B from "@effect-idempotency/core-copy"
import { Data, Effect, Schema } from "effect"
import { ok, strictEqual } from "node:assert"

ok(A.IdempotencyError.LeaseLost !== B.IdempotencyError.LeaseLost, "two module instances")

const lost = new B.IdempotencyError.LeaseLost({ method: "complete", recordId: "charge#k1" })
strictEqual(lost instanceof A.IdempotencyError.LeaseLost, false, "instanceof does not cross copies")
ok(A.IdempotencyError.isLeaseLost(lost), "isLeaseLost recognises the other copy's LeaseLost")
ok(A.IdempotencyError.isIdempotencyError(lost), "isIdempotencyError recognises it")

const down = new B.IdempotencyError.StoreUnavailable({ method: "reserve", cause: new Error("connection refused") })
ok(A.IdempotencyError.isStoreFailure(down), "isStoreFailure recognises the other copy's StoreUnavailable")
ok(B.IdempotencyError.isStoreFailure(new A.IdempotencyError.StoreUnavailable({ method: "reserve", cause: null })))

class LeaseLost extends Data.TaggedError("LeaseLost")<{ readonly method: string }> {}
strictEqual(A.IdempotencyError.isLeaseLost(new LeaseLost({ method: "complete" })), false, "a user's own tag")
strictEqual(A.IdempotencyError.isStoreFailure({ _tag: "StoreUnavailable" }), false, "a look-alike object")

// copy A's operation on copy B's memory store: the first run executes, the retry replays
let executions = 0
const once = A.Idempotency.once({ operation: "charge", key: "k-1", payload: { cents: 100 }, success: Schema.Number })
const charge = Effect.sync(() => ++executions).pipe(once, A.Idempotency.result)
const [first, retry] = await Effect.runPromise(
  Effect.all([charge, charge]).pipe(Effect.provide(B.IdempotencyStore.layerMemory))
)
strictEqual(executions, 1, "one execution")
strictEqual(first.replayed, false)
strictEqual(retry.replayed, true)
console.log("two-copies: the type-id guards recognise the other copy's errors; the store tag is shared")
