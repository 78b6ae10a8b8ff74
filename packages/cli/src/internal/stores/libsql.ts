/**
 * The libSQL store of a target (`file:<path>`, `libsql://…`), on `@effect/sql-libsql`.
 *
 * @internal
 */
import * as LibsqlClient from "@effect/sql-libsql/LibsqlClient"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import { InvalidStore } from "../../CliError.js"
import type { StoreTarget } from "../../StoreTarget.js"
import * as Sql from "./sql.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "Libsql" }>) =>
  Sql.layer(
    "Libsql",
    target.table,
    LibsqlClient.layer({
      url: Redacted.value(target.url),
      ...(target.authToken === undefined ? {} : { authToken: target.authToken })
    }),
    // `@libsql/client` refuses a URL it cannot use with a `URL_*` code, and a message that quotes it
    (cause) =>
      Predicate.hasProperty(cause, "code") && typeof cause.code === "string" && cause.code.startsWith("URL_")
        ? new InvalidStore({ reason: `the libSQL client refused the URL (${cause.code})` })
        : undefined
  )
