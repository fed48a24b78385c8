-- directory_search matches "an escaped case-insensitive substring of name or role" (SPEC §4)
-- whatever the database's locale. ILIKE folds case with the collation of what it compares,
-- and a database whose LC_CTYPE is C (the embedded cluster's: internal/pglocal initdb
-- --locale=C) folds only A-Z: a role "ÜBER" was found by "ÜBER" and not by "über", while the
-- same search on a database in a UTF-8 locale found it (outside probe). agentbox_fold is the
-- collation the search compares under: ICU's root locale where the server is built with ICU
-- (Debian's and most builds are), which folds every script alike in any database; elsewhere
-- the database's own LC_CTYPE, as before. It sorts nothing (ordering keeps the columns' own
-- collation).
DO $$
BEGIN
    CREATE COLLATION agentbox_fold (provider = icu, locale = 'und');
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR undefined_object THEN
    EXECUTE format('CREATE COLLATION agentbox_fold (provider = libc, locale = %L)',
                   (SELECT datctype FROM pg_database WHERE datname = current_database()));
END
$$;
