/**
 * The run's MariaDB server, as the global setup provides it: `@effect/sql-mysql2` connects to the
 * URL, the server is MariaDB, and the connection's database is the run's own.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { inject } from "vitest"

const url = inject("mysqlUrl")

describe("MariaDbServer", () => {
  // live clock: the client's connection timeout would never fire on the TestClock
  it.live("is MariaDB, on the run's own database", () =>
    Effect.gen(function*() {
      const sql = yield* MysqlClient.MysqlClient
      const [version] = yield* sql<{ readonly version: string }>`SELECT VERSION() AS version`
      assert.match(version!.version, /MariaDB/)
      const [current] = yield* sql<{ readonly name: string | null }>`SELECT DATABASE() AS name`
      assert.strictEqual(current!.name, new URL(url).pathname.slice(1))
      assert.match(current!.name ?? "", /^idem_[a-z0-9]{8}$/)
    }).pipe(Effect.provide(MysqlClient.layer({ url: Redacted.make(url) }))))
})
