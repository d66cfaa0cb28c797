/* Hidden cases for cJSON_IsInteger, including items built without parsing. */
#include <stdio.h>
#include <stdlib.h>

#include "cJSON.h"

static int failures = 0;

static void check(const char *what, cJSON *item, cJSON_bool want)
{
    if (cJSON_IsInteger(item) != want)
    {
        printf("FAIL: %s\n", what);
        failures++;
    }
    cJSON_Delete(item);
}

int main(void)
{
    check("12", cJSON_Parse("12"), 1);
    check("-0", cJSON_Parse("-0"), 1);
    check("12.000", cJSON_Parse("12.000"), 1);
    check("5e2", cJSON_Parse("5e2"), 1);
    check("0.5", cJSON_Parse("0.5"), 0);
    check("-1.25", cJSON_Parse("-1.25"), 0);
    check("1e10", cJSON_Parse("1e10"), 0);
    check("-1e10", cJSON_Parse("-1e10"), 0);
    check("created 7", cJSON_CreateNumber(7), 1);
    check("created 7.25", cJSON_CreateNumber(7.25), 0);
    check("a string", cJSON_CreateString("7"), 0);
    check("false", cJSON_CreateFalse(), 0);
    check("an object", cJSON_Parse("{\"a\":1}"), 0);
    if (cJSON_IsInteger(NULL))
    {
        printf("FAIL: NULL\n");
        failures++;
    }
    if (failures == 0)
    {
        printf("ok\n");
    }
    return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
