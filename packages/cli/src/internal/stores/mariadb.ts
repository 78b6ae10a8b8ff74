/**
 * The MariaDB store of a target (`mysql://`, `mariadb://`), on `@effect/sql-mysql2`.
 *
 * @internal
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import type { StoreTarget } from "../../StoreTarget.js"
import * as Sql from "./sql.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "MariaDb" }>) =>
  // the client answers `SELECT 1` within 5 seconds, or fails
  Sql.layer("MariaDb", target.table, MysqlClient.layer({ url: target.url, maxConnections: 2 }))
