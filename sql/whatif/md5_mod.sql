-- md5_mod(key, m): md5_number(key) mod m, the replica of a key among m (Python: int.from_bytes(md5(key), 'little')
-- % m), taken from md5's two 64-bit halves: md5_number(k) = md5_number_lower(k) * 2^64 + md5_number_upper(k)
-- (DuckDB names the halves by the digest's byte order), so ((lower mod m) * (2^64 mod m) + upper mod m) mod m is
-- the same number in UBIGINT arithmetic, about twice as fast as a 128-bit modulo (m below 2^32).
CREATE OR REPLACE TEMP MACRO md5_mod(key, m) AS
    ((md5_number_lower(key) % m::UBIGINT) * ((18446744073709551615 % m::UBIGINT + 1) % m::UBIGINT)
     + md5_number_upper(key) % m::UBIGINT) % m::UBIGINT
