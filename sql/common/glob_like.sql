-- glob_like(pattern): a configuration glob (* any run of characters, ? one character; docs/configuration.md) as
-- a LIKE pattern for like_escape / ilike_escape with the escape character '\'. LIKE's own wildcards (% and _) and
-- the escape character are escaped first, so that in a glob they match only themselves.
CREATE OR REPLACE TEMP MACRO glob_like(pattern) AS
    replace(replace(replace(replace(replace(pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%'), '?', '_')
