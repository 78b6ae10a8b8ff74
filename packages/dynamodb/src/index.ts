/**
 * @since 0.1.0
 */
export * as DynamoDbClient from "./DynamoDbClient.js"

/**
 * @since 0.1.0
 */
export * as DynamoDbStore from "./DynamoDbStore.js"

/**
 * @since 0.1.0
 */
export * as DynamoDbTable from "./DynamoDbTable.js"

/**
 * @since 0.1.0
 */
export * as DynamoDbTransactional from "./DynamoDbTransactional.js"
