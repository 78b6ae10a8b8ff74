/**
 * The SQLite store of a target (`sqlite:<path>`), on `@effect/sql-sqlite-node`, an optional peer.
 *
 * @internal
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type { StoreTarget } from "../../StoreTarget.js"
import * as Sql from "./sql.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "Sqlite" }>) =>
  Sql.layer("Sqlite", target.table, SqliteClient.layer({ filename: target.filename }))
