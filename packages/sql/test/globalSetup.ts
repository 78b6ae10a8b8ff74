/**
 * The MariaDB server of the run, once for all the package's test files: a database of the run's own
 * on the server `TEST_MYSQL_URL` names (CI sets it to the machine's server), else on a `mariadbd`
 * started here on a free port of 127.0.0.1 (see test-support's `MariaDb`). The tests read its URL with
 * `inject("mysqlUrl")`; at the end the database is dropped, or the server stopped and its directory
 * removed. A missing server fails the run, never a skip.
 */
import { testDatabase } from "@effect-idempotency/test-support/MariaDb"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    /** `mysql://USER[:PASSWORD]@127.0.0.1:PORT/idem_xxxxxxxx`: the run's own database. */
    readonly mysqlUrl: string
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const database = await Effect.runPromise(
    Scope.extend(testDatabase, scope).pipe(Effect.tapErrorCause(() => Scope.close(scope, Exit.void)))
  )
  project.provide("mysqlUrl", database.url)
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}
