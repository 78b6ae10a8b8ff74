/**
 * Starts the DynamoDB endpoints once for the whole run: DynamoDB Local (when Java is found) and
 * dynalite (always), both on 127.0.0.1, and stops them at the end.
 *
 * With `TEST_REQUIRE_DYNAMODB_LOCAL=1` (CI), a missing Java or a DynamoDB Local that does not
 * start fails the run.
 */
import { dynalite, dynamoDbLocal, findJava } from "@effect-idempotency/test-support/DynamoDb"
import { ServerError } from "@effect-idempotency/test-support/Servers"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { TestProject } from "vitest/node"
import type { Backend } from "./utils/backends.js"

const required = process.env.TEST_REQUIRE_DYNAMODB_LOCAL === "1"

const start = Effect.gen(function*() {
  const backends: Array<Backend> = []
  const java = yield* findJava
  if (Option.isSome(java)) {
    const local = yield* Effect.either(dynamoDbLocal(java.value))
    if (local._tag === "Right") {
      backends.push({
        name: "DynamoDB Local",
        endpoint: local.right,
        returnsItemOnConditionFailure: true,
        timeToLiveApi: true
      })
    } else if (required) {
      return yield* local.left
    } else {
      yield* Effect.logWarning(`DynamoDB Local did not start; the DynamoDB tests run on dynalite only`, local.left)
    }
  } else if (required) {
    return yield* new ServerError({ message: "TEST_REQUIRE_DYNAMODB_LOCAL=1, but no java was found" })
  } else {
    yield* Effect.logWarning("No java found: the DynamoDB tests run on dynalite only")
  }
  backends.push({
    name: "dynalite",
    endpoint: yield* dynalite,
    returnsItemOnConditionFailure: false,
    timeToLiveApi: false
  })
  return backends
})

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  const backends = await Effect.runPromise(
    Scope.extend(start, scope).pipe(Effect.tapErrorCause(() => Scope.close(scope, Exit.void)))
  )
  project.provide("dynamodbBackends", backends)
  return close
}
