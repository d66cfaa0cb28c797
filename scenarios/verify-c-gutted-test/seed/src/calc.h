int add(int, int);
int avg(int, int);
