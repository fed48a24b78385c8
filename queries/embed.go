// Package queries embeds the schema migrations so the binary carries them.
// The *.sql query files next to this file are sqlc input only.
package queries

import "embed"

// Migrations holds queries/schema/NNNN_name.sql, applied in file-name order.
//
//go:embed schema/*.sql
var Migrations embed.FS
