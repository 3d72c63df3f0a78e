-- core.billing_charges: one row per FOCUS charge row overlapping the UTC day, with its share of the day.
-- day_fraction is the overlap of the charge period with the day over the period's length; the day's costs are
-- the row's costs times that fraction, rounded to 1e-12 of the currency unit.
WITH accepted AS (
    SELECT b.*
    FROM billing_day AS b
    LEFT JOIN billing_duplicates AS d ON d.row_fingerprint = b.row_fingerprint
    WHERE b.reason IS NULL AND (d.row_fingerprint IS NULL OR b.file_index = d.kept_file_index)
), shares AS (
    SELECT
        *,
        epoch(ChargePeriodEnd - ChargePeriodStart) AS period_s,
        epoch(least(ChargePeriodEnd, $day_end::TIMESTAMPTZ) - greatest(ChargePeriodStart, $day_start::TIMESTAMPTZ))
            AS overlap_s
    FROM accepted
)
SELECT
    $day::DATE AS day,
    ChargePeriodStart,
    ChargePeriodEnd,
    BillingPeriodStart,
    EffectiveCost,
    BilledCost,
    BillingCurrency,
    ChargeCategory,
    ChargeClass,
    ServiceCategory,
    ServiceName,
    ProviderName,
    ResourceId,
    SkuId,
    ConsumedQuantity,
    ConsumedUnit,
    Tags,
    CASE WHEN period_s = 0 THEN 1.0 ELSE overlap_s / period_s END AS day_fraction,
    CAST(EffectiveCost * day_fraction AS DECIMAL(38, 12)) AS effective_cost_day,
    CAST(BilledCost * day_fraction AS DECIMAL(38, 12)) AS billed_cost_day,
    ConsumedQuantity * day_fraction AS consumed_quantity_day,
    source_file,
    source_line
FROM shares
ORDER BY source_file, source_line
