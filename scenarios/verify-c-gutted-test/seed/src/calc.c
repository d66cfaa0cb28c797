#include "calc.h"
int add(int a, int b) { return a + b; }
int avg(int a, int b) { return (a + b + 1) / 2; }
