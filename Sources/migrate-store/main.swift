// migrate-store: copy, sync, verify, inspect and check DataStore stores of any kind.
import MigrateStoreCommand

MigrateStore.main()
