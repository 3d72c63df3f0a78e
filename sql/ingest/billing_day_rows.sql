-- Staged billing rows that belong to the UTC day: those whose charge period [start, end) overlaps it (a
-- zero-length period belongs to the day it falls on). A row whose charge period cannot be read belongs to the
-- day of its BillingPeriodStart, and a row with no readable date at all to every day, so it is never lost.
SELECT *
FROM staged_billing
WHERE CASE
    WHEN ChargePeriodStart IS NOT NULL AND ChargePeriodEnd IS NOT NULL AND ChargePeriodEnd > ChargePeriodStart
        THEN ChargePeriodStart < $day_end::TIMESTAMPTZ AND ChargePeriodEnd > $day_start::TIMESTAMPTZ
    WHEN coalesce(ChargePeriodStart, BillingPeriodStart) IS NOT NULL
        THEN coalesce(ChargePeriodStart, BillingPeriodStart) >= $day_start::TIMESTAMPTZ
         AND coalesce(ChargePeriodStart, BillingPeriodStart) < $day_end::TIMESTAMPTZ
    ELSE true
END
