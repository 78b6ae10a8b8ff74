/**
 * The RabbitMQ of the run: the server `TEST_AMQP_URL` names (CI sets it to the machine's server),
 * else a `rabbitmq-server` node started here on free loopback ports and stopped at the end. Neither
 * is a failure of the run, never a skip.
 */
import { rabbitMq } from "@effect-idempotency/test-support/Brokers"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { TestProject } from "vitest/node"

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const server = await Effect.runPromise(
    Scope.extend(rabbitMq, scope).pipe(Effect.tapErrorCause(() => Scope.close(scope, Exit.void)))
  )
  project.provide("amqpUrl", server.url)
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}

declare module "vitest" {
  export interface ProvidedContext {
    amqpUrl: string
  }
}
